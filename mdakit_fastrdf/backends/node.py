"""The node backend (parent side): starts the planned workers, hands them parts from a
queue, recomputes stragglers' parts, and stops the run on a failure."""

from __future__ import annotations

import collections
import math
import os
import pickle
import signal
import time
from dataclasses import dataclass, field

from .base import _analysis_of, _OwnBackend, _quiet
from .errors import RemoteTraceback, WorkerDiedError, WorkerError
from .feed import Ring, ring_directory
from .main_guard import main_guard_error, unguarded_main_call
from .planning import _AUTO, WorkerSpec, _check_auto_int, _fmt_cpus, plan_workers
from .topology import NodeTopology, detect_topology
from .worker import _worker_main

__all__ = ["NodeBackend"]

#: Bytes of frame slots per fed worker (at most; see NodeBackend, Readers)
FEED_RING_BYTES = 1 << 30


@dataclass
class _Worker:
    spec: WorkerSpec
    proc: object
    conn: object
    status: str = "starting"  # starting, idle, busy, stopped, ended
    part: int | None = None
    t0: float = 0.0
    pid: int | None = None
    cpus: list = field(default_factory=list)
    parts: int = 0
    frames: int = 0
    busy_s: float = 0.0
    duplicates: int = 0
    devices_used: set = field(default_factory=set)
    queued: collections.deque = field(default_factory=collections.deque)  # fed: next parts
    fed: bool = False
    unsent: list = field(default_factory=list)  # parts to send once the payload is sent
    feed_wait_s: float = 0.0

    def rate(self):
        return self.frames / self.busy_s if self.busy_s > 0 else None


class NodeBackend(_OwnBackend):
    r"""All GPUs and CPU sockets of one node, with dynamic load balancing.

    Selected with ``run(backend='node')`` (options at their defaults, ``n_workers`` caps
    the number of workers) or by passing an instance, ``run(backend=NodeBackend(...))``.

    Parameters
    ----------
    n_workers : int, optional
        Total number of workers (GPU workers first, then CPU workers). Default: as the
        other options say.
    gpus : 'auto', None, int or list of int, optional
        GPUs to use, one worker each: ``'auto'`` (default) all GPUs this process sees
        (counted without initialising CUDA: ``CUDA_VISIBLE_DEVICES``, the NVIDIA driver's
        ``/proc`` entries or ``nvidia-smi -L``; none when this build has no CUDA kernels),
        a count (the first ``n``), a list of indices, or None for no GPU workers.
    cpu_workers : 'auto' or int, optional
        Number of CPU worker processes. ``'auto'``: two per socket / NUMA node on the cores
        left after reserving one core per GPU worker (one if a single core is left), so that
        one worker reads its next frame while the other computes.
    threads_per_worker : 'auto' or int, optional
        CPU threads of each CPU worker (``'auto'``: one per physical core of its block).
        An analysis's own ``n_threads`` wins over this.
    hybrid : 'auto', bool, optional
        CPU workers beside GPU workers. ``'auto'``: yes, unless the analysis asks for
        ``device='cuda'``; ``False`` leaves the CPUs to the GPU workers. On a CPU-only node
        the CPU workers always run.
    part_frames : 'auto' or int, optional
        Frames per part taken from the queue. ``'auto'``: eight parts per worker. Smaller
        parts balance better; each part costs one message and one setup of the analysis in
        the worker (no extra frame read: workers skip MDAnalysis's rewind at the end of a
        part). An explicit ``run(n_parts=...)`` wins.
    start_method : {None, 'fork', 'spawn', 'forkserver'}, optional
        How CPU workers start (default ``'fork'`` on Linux: fast, and safe because the
        parent never initialises CUDA for this backend).
    readers : 'auto' or int, optional
        Reader processes that decode the frames for the compute workers (one logical CPU
        each; see *Readers* below). ``'auto'`` (default): with GPU workers, every CPU they
        leave free, and no CPU workers unless ``hybrid=True``; on a CPU-only node none (its
        CPU workers read their own frames). ``0``: every worker reads its own frames.
    gpu_threads : 'auto' or int, optional
        Cores (and host threads) of each GPU worker. ``'auto'``: one without readers; with
        readers, a quarter of the node's cores per GPU (1 to 4), for the host's part of a
        frame (packing it for the GPU, wrapping it into the box), which is then all the
        worker does.
    workers_per_gpu : int, optional
        Worker processes per GPU (default 1). Two let one worker's host part of a frame
        (packing it, Python) run while the other's kernel runs.
    gpu_start_method : {'auto', 'spawn', 'forkserver'}, optional
        How GPU workers start. ``'auto'`` (default): ``fork`` while this process has not used
        CUDA (this package has not, and no other library has loaded the NVIDIA driver's
        ``libcuda``: :func:`~mdakit_fastrdf.engine.cuda_used_in_this_process`), which starts
        a worker in milliseconds and needs no main guard; else ``spawn`` (a new interpreter,
        about a second with its imports). ``'fork'`` cannot be asked for: CUDA does not
        survive a fork from a process that has used it.
    pin : bool, optional
        Pin each worker to its cores with :func:`os.sched_setaffinity` (default True).
    topology : NodeTopology, optional
        The node to plan for (default: read from ``/sys/devices/system`` and the GPU count).

    Notes
    -----
    **Binding.** Each worker process calls
    :func:`mdakit_fastrdf.engine.set_worker_placement` before it unpickles the analysis.
    In a GPU worker bound to GPU ``k``, the analysis's ``device='auto'`` runs on GPU ``k``
    (the CPU for frames below :data:`~mdakit_fastrdf.engine.AUTO_GPU_MIN_PAIRS` pairs) and
    ``device='cuda[:N]'`` on GPU ``k``; choose GPUs with `gpus`. In a CPU worker ``'auto'``
    runs on the CPU with the worker's threads. ``device='cpu'`` plans CPU workers only,
    ``device='cuda'`` GPU workers only.

    **Load balancing.** The frames are cut into parts; each worker asks for the next part
    when it has finished one. When the queue is empty, an idle worker recomputes a part that
    another worker has been busy with for more than 1.5 times what the idle worker needs for
    it (measured rates), and the first copy to finish counts: a slow CPU worker cannot hold
    back the end of a run (CADISHI saw this tail in its hybrid runs).

    **Readers.** A GPU histograms a frame in milliseconds, while decoding it from a
    compressed trajectory takes one core tens to hundreds of milliseconds (1M atoms of XTC:
    about 90 ms). With readers, the reading of every frame moves to reader processes (each
    opens the trajectory itself): they decode frames in parallel and write each frame's rows
    (only the atoms, or centres, the analysis histograms), box and volume into shared-memory
    slots of the compute worker that will histogram it, which receives its next part while
    it computes the current one (:mod:`mdakit_fastrdf.backends.feed`). The parts, their
    frames and their order are those of a run without readers, so the results are the same
    bit for bit. An analysis whose frames need more than fixed rows and the box (an
    UpdatingAtomGroup, the k-space sums of :class:`~mdakit_fastrdf.StructureFactor`) is run
    without readers.

    **Failures.** See the module documentation: exceptions are raised in the caller with the
    worker's traceback, a dead worker raises :class:`WorkerDiedError` as soon as its process
    ends (also while it starts), Ctrl-C terminates all workers. Workers also die with the
    calling process.

    **Scripts.** A worker that does not fork (GPU workers once the calling process has used
    CUDA; CPU workers with ``start_method='spawn'`` or ``'forkserver'``) imports the main
    script again, so a script
    must call :meth:`run` under ``if __name__ == "__main__":``. When it does not, the run
    stops before any worker starts, with a RuntimeError that names the script's line.

    After a run, :attr:`last_run` describes the workers (pid, cpus, parts, frames, busy
    seconds, duplicates, and ``devices_used``: the devices their engines really ran on,
    e.g. ``['cuda:1']``) and the wall time.

    Examples
    --------
    ::

        rdf = InterRDF(ow, ow).run(backend="node")                    # every GPU and socket
        rdf = InterRDF(ow, ow).run(backend=NodeBackend(gpus=[0, 1], hybrid=False))
        rdf = InterRDF(ow, ow, device="cpu").run(backend=NodeBackend(cpu_workers=4))
    """

    def __init__(self, n_workers=None, *, gpus=_AUTO, cpu_workers=_AUTO,
                 threads_per_worker=_AUTO, hybrid=_AUTO, part_frames=_AUTO, start_method=None,
                 gpu_start_method="auto", pin=True, topology=None, readers=_AUTO,
                 gpu_threads=_AUTO, workers_per_gpu=1, _gpu_standin=False):
        if topology is not None and not isinstance(topology, NodeTopology):
            raise TypeError(f"topology must be a NodeTopology or None, got {type(topology).__name__}")
        if not isinstance(pin, bool):
            raise TypeError(f"pin must be True or False, got {pin!r}")
        self.part_frames = _check_auto_int("part_frames", part_frames, 1,
                                           "it is the number of frames per part")
        self.topology = topology if topology is not None else detect_topology()
        self.options = {"gpus": gpus, "cpu_workers": cpu_workers,
                        "threads_per_worker": threads_per_worker, "hybrid": hybrid,
                        "n_workers": n_workers, "start_method": start_method,
                        "gpu_start_method": gpu_start_method,
                        "gpu_standin": bool(_gpu_standin), "readers": readers,
                        "gpu_threads": gpu_threads, "workers_per_gpu": workers_per_gpu}
        self.pin = pin
        self.specs = [s for s in self.plan("auto") if s.kind != "reader"]
        self.last_run = None
        super().__init__(len(self.specs))

    def plan(self, device="auto", feedable=True) -> list:
        """The workers for an analysis with this `device` (a list of :class:`WorkerSpec`,
        readers last); `feedable`: whether the analysis can take its frames from readers."""
        return plan_workers(self.topology, device=device, feedable=feedable, **self.options)

    def parts_for(self, n_frames: int) -> int:
        """Parts to cut ``n_frames`` into: ``part_frames`` each, or (``'auto'``) eight per
        worker, so that a worker that runs faster (a GPU beside CPU workers, or a core that
        shares less with its neighbours) takes more of them. A part costs a message and the
        analysis's set-up, no extra frame read (workers do not rewind the trajectory)."""
        if self.part_frames != _AUTO:
            return max(1, math.ceil(n_frames / self.part_frames))
        return max(1, min(n_frames, 8 * self.n_workers))

    def describe(self, device="auto", feedable=True) -> str:
        """The plan as text, one compute worker per line, then the readers."""
        t = self.topology
        head = (f"node: {len(t.groups)} CPU group(s) ({t.source}): "
                + "; ".join(f"{g.name} cpus {_fmt_cpus(g.cpus)} ({g.n_cores} cores)" for g in t.groups)
                + f"; {t.n_gpus} GPU(s) ({t.gpu_source or t.source})")
        plan = self.plan(device, feedable)
        lines = [head] + ["  " + s.describe() for s in plan if s.kind != "reader"]
        readers = [s for s in plan if s.kind == "reader"]
        if readers:
            cpus = sorted(c for s in readers for c in s.cpus)
            lines.append(f"  {len(readers)} reader(s), 1 cpu each (cpus {_fmt_cpus(cpus)}, "
                         f"{readers[0].start_method}): they decode the frames, the workers "
                         "above histogram them")
        return "\n".join(lines)

    def __repr__(self):
        return f"NodeBackend(n_workers={self.n_workers}, {self.options!r})"

    # -- running -------------------------------------------------------------------------
    def apply(self, func, computations):
        """Run ``func`` on every computation (part of the frames) on the planned workers and
        return the results in order."""
        import multiprocessing as mp
        from multiprocessing.connection import wait

        computations = list(computations)
        n = len(computations)
        if n == 0:
            return []
        analysis = _analysis_of(func)
        plan_device = getattr(analysis, "_plan_device", None)
        device = plan_device() if plan_device is not None else getattr(analysis, "device", "auto")
        can_feed = getattr(analysis, "_can_feed", None)
        feedable = bool(can_feed()) if can_feed is not None else False
        device = device if isinstance(device, str) else "auto"
        if device == "cpu" and getattr(analysis, "device", "cpu") != "cpu":
            # an analysis without GPU kernels (InterRDF_s): CPU workers whatever the GPUs
            plan = plan_workers(self.topology, device="cpu", feedable=feedable,
                                **{**self.options, "gpus": None, "hybrid": _AUTO})
        else:
            plan = self.plan(device, feedable)
        reader_specs = [s for s in plan if s.kind == "reader"]
        specs = [s for s in plan if s.kind != "reader"][:n]
        # a worker that does not fork imports the main script again: not if that reruns this
        methods = sorted({s.start_method for s in specs + reader_specs} - {"fork"})
        where = unguarded_main_call() if methods else None
        if where is not None:
            raise main_guard_error(where, methods, any(s.kind == "gpu" for s in specs))
        payload = pickle.dumps(_quiet(func), protocol=pickle.HIGHEST_PROTOCOL)
        rings, filled, tasks, depth, preissue = {}, {}, None, 1, []
        # A forked worker inherits the payload; the others get it through their pipe once
        # they say "hello": Python writes a spawned process's arguments to it before the
        # child reads them, and would wait for ever on one that died while starting.
        to_send = 0
        sizes = [len(c) for c in computations]
        pending = collections.deque(range(n))
        results = [None] * n
        owners = collections.defaultdict(set)
        done = [False] * n
        n_done = 0
        workers: list[_Worker] = []
        t_start = time.perf_counter()
        bar = self._progress_bar(sum(sizes))
        stats = {"duplicates_started": 0, "duplicates_won": 0}
        timeline = {"first_ready_s": None, "parts_done_s": []}
        dup_assigned = set()
        readers: list[_Worker] = []
        ok = False
        try:
            def unlink_rings_when_mapped():
                """Once every process of the run has mapped the rings (it said ready), their
                files go: the mappings stay, and nothing is left behind however the run
                ends."""
                if rings and all(x.pid is not None for x in workers + readers):
                    for ring in rings.values():
                        ring.unlink()

            def hand_payload(w):
                """The pickled analysis to a process that did not fork (it said hello);
                dropped once every such process has it."""
                nonlocal payload, to_send
                try:
                    w.conn.send_bytes(payload)
                except OSError:  # it died since
                    w.proc.join(2.0)
                    self._raise_died(w, computations)
                to_send -= 1
                if not to_send:
                    payload = None

            def send_unsent(w):
                try:
                    for msg in w.unsent:
                        w.conn.send(msg)
                except OSError:
                    w.proc.join(2.0)
                    self._raise_died(w, computations)
                w.unsent = []

            def top_up(w):
                """A fed worker holds its next parts (as many as its slots hold) while it
                computes one: the readers read ahead across the ends of its parts."""
                while w.fed and pending and len(w.queued) < depth:
                    idx = pending.popleft()
                    owners[idx].add(w.spec.rank)
                    w.queued.append(idx)
                    try:
                        w.conn.send(("part", idx, computations[idx]))
                    except OSError:
                        w.proc.join(2.0)
                        self._raise_died(w, computations)

            def assign(w, now):
                if pending:
                    idx = pending.popleft()
                else:
                    idx = self._straggler(w, workers, done, owners, sizes, now)
                    if idx is None:
                        w.status = "idle"
                        return
                    stats["duplicates_started"] += 1
                    w.duplicates += 1
                    dup_assigned.add((w.spec.rank, idx))
                owners[idx].add(w.spec.rank)
                w.status, w.part, w.t0 = "busy", idx, now
                try:
                    w.conn.send(("part", idx, computations[idx]))
                except OSError:  # it died since its last message
                    w.proc.join(2.0)
                    self._raise_died(w, computations)
                top_up(w)

            if reader_specs:
                # one ring of frame slots per compute worker (feed.py); queues of the spawn
                # context serve forked and spawned processes alike
                n_rows = len(analysis._layout().ix)
                slot_bytes = 12 * n_rows + 256
                # Slots: at least one per reader and two more; up to FEED_RING_BYTES per
                # worker, so that the readers read ahead while a GPU worker starts (imports,
                # CUDA: ~1 s), and no more than a worker's share of the frames
                share = math.ceil(sum(sizes) / len(specs)) + 1
                n_slots = max(3, math.ceil(len(reader_specs) / len(specs)) + 2,
                              min(FEED_RING_BYTES // slot_bytes, share, 1024))
                depth = max(1, math.ceil(n_slots / max(1, min(sizes))))
                where = ring_directory(len(specs) * n_slots * slot_bytes)
                qctx = mp.get_context("spawn")
                tasks = qctx.Queue()
                for spec in specs:
                    rings[spec.rank] = Ring.new(n_slots, n_rows, where)
                    filled[spec.rank] = qctx.Queue()
            now = time.perf_counter()
            for spec in specs + reader_specs:
                ctx = mp.get_context(spec.start_method)
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                inherit = spec.start_method == "fork"
                to_send += not inherit
                first = []
                if spec.kind == "reader":
                    feed = ("reader", tasks, {r: g.spec() for r, g in rings.items()}, filled)
                elif rings:
                    # A fed worker gets its first two parts now, and the readers start on
                    # their frames while the worker starts (a GPU worker: imports, CUDA)
                    first = [pending.popleft() for _ in range(1 + depth) if pending]
                    frames = [int(f) for i in first for f in computations[i][:, 1]]
                    pre = frames[: rings[spec.rank].n_slots]
                    preissue.extend((spec.rank, pos % rings[spec.rank].n_slots, pos, frame)
                                    for pos, frame in enumerate(pre))
                    feed = (rings[spec.rank].spec(), tasks, filled[spec.rank], len(pre))
                else:
                    feed = None
                proc = ctx.Process(target=_worker_main, name=f"mdakit-fastrdf-{spec.rank}",
                                   args=(child_conn, spec, payload if inherit else None,
                                         self.pin, os.getpid(), feed),
                                   daemon=True)
                proc.start()
                child_conn.close()
                w = _Worker(spec, proc, parent_conn, fed=bool(rings))
                (readers if spec.kind == "reader" else workers).append(w)
                if first:
                    for idx in first:
                        owners[idx].add(spec.rank)
                    w.part, w.queued, w.status, w.t0 = first[0], collections.deque(first[1:]), "busy", now
                    w.unsent = [("part", idx, computations[idx]) for idx in first]
                    if inherit:
                        send_unsent(w)
            # the readers' first frames, once every process is started (a put starts the
            # queue's feeder thread here: no fork after it)
            for task in preissue:
                tasks.put(task)
            if not to_send:
                payload = None

            while n_done < n:
                live = [w for w in workers if w.status not in ("stopped", "ended")]
                idle = any(w.status == "idle" for w in live)
                objs = ([w.conn for w in live + readers]
                        + [w.proc.sentinel for w in live + readers])
                ready = wait(objs, timeout=0.05 if idle else 1.0)
                now = time.perf_counter()
                for w in readers:
                    if w.conn in ready or w.proc.sentinel in ready:
                        while self._poll(w.conn):
                            try:
                                msg = w.conn.recv()
                            except (EOFError, OSError):
                                w.proc.join(2.0)
                                self._raise_died(w, computations)
                            if msg[0] == "hello":
                                hand_payload(w)
                            elif msg[0] == "ready":
                                w.pid, w.cpus, w.status = msg[2]["pid"], msg[2]["cpus"], "reading"
                                unlink_rings_when_mapped()
                            elif msg[0] == "error":
                                self._raise_remote(w, msg, computations)
                        if w.proc.sentinel in ready and not self._poll(w.conn):
                            w.proc.join(2.0)
                            self._raise_died(w, computations)
                for w in live:
                    if w.conn in ready or w.proc.sentinel in ready:
                        while n_done < n and self._poll(w.conn):
                            try:
                                msg = w.conn.recv()
                            except (EOFError, OSError):  # its end of the pipe closed
                                w.proc.join(2.0)
                                self._raise_died(w, computations)
                            kind = msg[0]
                            if kind == "hello":  # a worker that did not fork: its payload
                                hand_payload(w)
                                send_unsent(w)
                            elif kind == "ready":
                                w.pid, w.cpus = msg[2]["pid"], msg[2]["cpus"]
                                unlink_rings_when_mapped()
                                if timeline["first_ready_s"] is None:
                                    timeline["first_ready_s"] = now - t_start
                                if w.status == "starting":  # (a fed worker has its parts)
                                    assign(w, now)
                            elif kind == "done":
                                _, idx, res, secs, used, wait_s = msg
                                w.feed_wait_s += wait_s
                                timeline["parts_done_s"].append(round(now - t_start, 4))
                                if used is not None:
                                    w.devices_used.add(used)
                                w.parts += 1
                                w.frames += sizes[idx]
                                w.busy_s += secs
                                w.part = None
                                if not done[idx]:
                                    done[idx] = True
                                    results[idx] = res
                                    n_done += 1
                                    if (w.spec.rank, idx) in dup_assigned:
                                        stats["duplicates_won"] += 1
                                    if bar is not None:
                                        bar.update(sizes[idx])
                                if w.queued:  # a fed worker goes on with its next part
                                    w.part, w.t0 = w.queued.popleft(), now
                                    top_up(w)
                                elif n_done < n:
                                    assign(w, now)
                                else:
                                    w.status = "idle"
                            elif kind == "error":
                                self._raise_remote(w, msg, computations)
                        if w.proc.sentinel in ready and n_done < n and not self._poll(w.conn):
                            w.proc.join(2.0)
                            self._raise_died(w, computations)
                for w in live:
                    if w.status == "idle" and n_done < n:
                        assign(w, now)
            ok = True
        finally:
            self._shutdown(readers, graceful=False)  # they hold nothing: end them first
            self._shutdown(workers, graceful=ok)
            for ring in rings.values():
                ring.close(unlink=True)
            for q in ([tasks] if tasks is not None else []) + list(filled.values()):
                q.close()
                q.cancel_join_thread()
            if bar is not None:
                bar.close()
            self.last_run = {
                "wall_s": time.perf_counter() - t_start,
                **timeline,
                "n_parts": n,
                "n_frames": sum(sizes),
                **stats,
                "workers": [
                    {"rank": w.spec.rank, "kind": w.spec.kind, "device": w.spec.device,
                     "n_threads": w.spec.n_threads, "start_method": w.spec.start_method,
                     "pid": w.pid, "cpus": w.cpus, "parts": w.parts, "frames": w.frames,
                     "busy_s": w.busy_s, "duplicates": w.duplicates,
                     "feed_wait_s": w.feed_wait_s,
                     "devices_used": sorted(w.devices_used)}
                    for w in workers],
                "readers": [{"rank": w.spec.rank, "pid": w.pid or w.proc.pid,
                             "cpus": w.cpus or list(w.spec.cpus)}
                            for w in readers],
            }
        return results

    @staticmethod
    def _poll(conn):
        try:
            return conn.poll()
        except (OSError, EOFError):
            return False

    @staticmethod
    def _straggler(w, workers, done, owners, sizes, now):
        """A part worth recomputing on idle worker ``w``, or None."""
        rate_w = w.rate()
        if rate_w is None:
            return None
        best, best_remaining = None, 0.0
        for o in workers:
            if o is w or o.status != "busy" or o.part is None:
                continue
            idx = o.part
            if done[idx] or len(owners[idx]) > 1:
                continue
            elapsed = now - o.t0
            rate_o = o.rate()
            remaining = sizes[idx] / rate_o - elapsed if rate_o else elapsed
            if remaining > 1.5 * sizes[idx] / rate_w + 0.05 and remaining > best_remaining:
                best, best_remaining = idx, remaining
        return best

    def _frames_text(self, computations, idx):
        if idx is None:
            return "before its first part"
        fr = computations[idx][:, 1]
        return f"on frames {fr[0]}..{fr[-1]} (part {idx})" if len(fr) else f"on part {idx}"

    def _raise_remote(self, w, msg, computations):
        _, idx, tname, text, tb, blob = msg
        where = (f"node backend {w.spec.describe()}, pid {w.pid}, "
                 f"{self._frames_text(computations, idx)}")
        exc = None
        if blob is not None:
            try:
                exc = pickle.loads(blob)
            except Exception:  # noqa: BLE001 - not unpicklable here: raise a WorkerError
                exc = None
        if isinstance(exc, BaseException):
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised in {where}")
            raise exc from RemoteTraceback(f"\n\"\"\"\nTraceback in {where}:\n{tb}\"\"\"")
        raise WorkerError(f"{tname}: {text}\n(raised in {where})\n\nWorker traceback:\n{tb}")

    def _raise_died(self, w, computations):
        code = w.proc.exitcode
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        elif code is None:
            how = "closed its connection"
        else:
            how = f"exited with code {code}"
        doing = ("while starting (see its output above)"
                 if w.status == "starting" or w.pid is None
                 else "while reading frames" if w.spec.kind == "reader"
                 else self._frames_text(computations, w.part) if w.status == "busy"
                 else "while idle")
        hint = ""
        if code == -signal.SIGKILL:
            hint = " A SIGKILL often means the operating system ran out of memory (dmesg)."
        raise WorkerDiedError(
            f"node backend {w.spec.describe()}, pid {w.pid or w.proc.pid}, {how} {doing}; "
            f"the run was stopped and no result was produced.{hint}")

    @staticmethod
    def _shutdown(workers, graceful):
        stopped = []
        for w in workers:
            if w.proc.exitcode is not None:
                continue
            if graceful and w.status in ("idle", "starting") and w.status != "busy":
                try:
                    w.conn.send(("stop",))
                    if w.status == "idle":  # (one still starting is waited for)
                        stopped.append(w)
                    w.status = "stopped"
                    continue
                except (OSError, ValueError):
                    pass
            w.proc.terminate()
        # A worker that has run and is told to stop has handed back all it computed: it may
        # end (a GPU worker releases its CUDA context, ~0.1 s) after the run returns;
        # multiprocessing reaps it. Every other worker is ended and waited for.
        deadline = time.monotonic() + 5.0
        for w in workers:
            if w not in stopped:
                w.proc.join(max(0.0, deadline - time.monotonic()))
        for w in workers:
            if w not in stopped and w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join(1.0)
            try:
                w.conn.close()
            except Exception:  # noqa: BLE001, S110 - closing anyway
                pass
            w.status = "ended"
