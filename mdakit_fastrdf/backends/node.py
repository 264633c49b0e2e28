"""The node backend (parent side): starts the planned workers and readers (or finds those
of a warm engine), hands them the parts the scheduler chooses, cancels the losing copy of
a recomputed part, and stops the run on a failure."""

from __future__ import annotations

import atexit
import math
import os
import pickle
import signal
import time
from dataclasses import dataclass, field

from . import payload
from .base import _analysis_of, _OwnBackend, _quiet
from .errors import RemoteTraceback, WorkerDiedError, WorkerError
from .feed import Ring, ring_directory
from .frames import CancelFlags
from .main_guard import main_guard_error, unguarded_main_call
from .messages import (HANDLERS, End, Ended, Exit, Failed, Part, Reading, Run, RunOver,
                       Stop)
from .planning import _AUTO, WorkerSpec, _check_auto_int, _fmt_cpus, plan_workers
from .scheduler import Scheduler, WorkerState, guided_sizes
from .topology import NodeTopology, detect_topology
from .trace import mark
from .worker import _worker_main

__all__ = ["NodeBackend"]

#: Bytes of frame slots per fed worker (at most; see NodeBackend, Readers)
FEED_RING_BYTES = 1 << 30
#: Frame slots of a CPU worker beside GPU workers (it reads one frame ahead of the one it
#: computes: the readers' share goes to the GPU workers)
SLOW_RING_SLOTS = 3
#: seconds a warm engine's next run waits for a worker that was still busy with a
#: cancelled copy when the last run ended (:meth:`_Pool.settle`); one that has not stopped
#: by then is ended and replaced (a new GPU worker costs ~0.5-0.8 s: its CUDA start)
SETTLE_S = 0.5


@dataclass
class _Worker:
    """A process of a run (compute worker or reader), as the parent sees it; which parts it
    holds and its rates are the scheduler's (:class:`~.scheduler.WorkerState`)."""

    spec: WorkerSpec
    proc: object
    conn: object
    status: str = "starting"  # starting, idle, busy, stopped, ended
    part: int | None = None  # the part it computes, for the message of a death
    pid: int | None = None
    cpus: list = field(default_factory=list)
    devices_used: set = field(default_factory=set)
    unsent: list = field(default_factory=list)  # parts to send once the payload is sent
    has_payload: bool = False
    mapped: bool = False  # it said ready in this run (mapped the run's files)
    drained: bool = True  # (a warm engine's worker) no reading of its ring outstanding
    feed_wait_s: float = 0.0

    def reset(self):
        """A warm engine's process, at the start of its next run."""
        self.status, self.part, self.mapped, self.has_payload = "starting", None, False, True
        self.unsent, self.feed_wait_s, self.devices_used = [], 0.0, set()
        self.drained = True


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
        CPU workers beside GPU workers. ``'auto'``: only when asked for with
        `cpu_workers` (with readers, the free CPUs read for the GPUs instead); ``True``:
        two per socket. Beside GPU workers fed by readers they share the readers' cores
        at idle priority (Linux ``SCHED_IDLE``: they run only on cycles the readers leave,
        so the GPUs' feed is never slower), and the scheduler gives them only parts they
        finish before the GPUs would (see *Load balancing*); ``False`` leaves the CPUs to
        the GPU workers. With an explicit ``readers=N``, CPU workers take the cores the
        readers leave, at normal priority. On a CPU-only node the CPU workers always run.
    part_frames : 'auto' or int, optional
        Frames per part taken from the queue. ``'auto'``: parts that shrink towards the
        end of the run (:meth:`part_sizes`: the first ones long, the last of one frame).
        Each part costs one message, one setup of the analysis in the worker and, on a
        GPU, one synchronisation (no extra frame read: workers skip MDAnalysis's rewind at
        the end of a part). An explicit ``run(n_parts=...)`` wins (even parts).
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

    **Load balancing** (:mod:`~mdakit_fastrdf.backends.scheduler`). The frames are cut
    into parts that shrink towards the end; each worker takes the next part when it has
    finished one (a worker fed by readers asks for it a little ahead, so that its readers
    read across the end of a part). A CPU worker beside GPU workers takes a part only when
    it will finish it before the GPUs would finish the rest without it, at the rates
    measured in the run. When the queue is empty, an idle worker recomputes a part (being
    computed or waiting at another worker) whose owner would finish it more than 1.5 times
    later, and the first copy to finish counts; the other copy is cancelled at its next
    frame and never waited for: a slow worker cannot hold back the end of a run (CADISHI
    saw this tail in its hybrid runs).

    **A warm engine.** ``with NodeBackend(...) as node:`` keeps the workers and readers,
    and the GPU workers' CUDA contexts, from one run to the next until the block ends, so
    that a notebook running many analyses on one trajectory starts them once (the same
    processes, the same counts). A run of another plan (another device; an analysis
    without readers) replaces them.

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

    After a run, :attr:`last_run` describes the workers (pid, as the worker reported it when
    ready, None if it was still starting when the run ended; ``process``, its process's pid
    in any case; cpus, parts, frames, busy seconds, duplicates, and ``devices_used``: the
    devices their engines really ran on, e.g. ``['cuda:1']``) and the wall time.

    Examples
    --------
    ::

        rdf = InterRDF(ow, ow).run(backend="node")                    # every GPU and socket
        rdf = InterRDF(ow, ow).run(backend=NodeBackend(gpus=[0, 1], hybrid=False))
        rdf = InterRDF(ow, ow, device="cpu").run(backend=NodeBackend(cpu_workers=4))
        with NodeBackend() as node:                                  # a warm engine
            g_oo = InterRDF(ow, ow).run(backend=node)
            g_on = InterRDF(ow, na).run(backend=node)                # the same workers
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
        self._pool = None
        super().__init__(len(self.specs))

    # -- a warm engine ---------------------------------------------------------------------
    def __enter__(self):
        """``with NodeBackend(...) as node:`` keeps the workers and readers (and the GPU
        workers' CUDA contexts) alive from one run to the next, until the block ends: a
        notebook running many analyses on one trajectory starts them once."""
        if self._pool is None:
            self._pool = _Pool()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """End the processes a ``with`` block kept (called when the block ends)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

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
    def apply(self, func, computations, *, payload_bytes=None):
        """Run ``func`` on every computation (part of the frames) on the planned workers and
        return the results in order. `payload_bytes`: ``func`` as
        :func:`.payload.dumps` pickled it (a dask task's, passed on rather than pickled
        again)."""
        computations = list(computations)
        if not computations:
            return []
        mark("apply", "parent", parts=len(computations))
        reap_ended()  # the last cold run's readers
        run = _NodeRun(self, func, computations, payload_bytes)
        mark("payload", "parent", nbytes=len(run.payload))
        try:
            run.start()
            mark("launched", "parent", workers=len(run.workers), readers=len(run.readers))
            run.loop()
            mark("loop_end", "parent")
            run.ok = True
        finally:
            self.last_run = run.finish()
            mark("finished", "parent")
        return run.results

    def part_sizes(self, n_frames: int):
        """The sizes of the parts ``n_frames`` frames are cut into: with ``part_frames``
        given, equal parts of that many frames (None: MDAnalysis's even split); else parts
        that shrink towards the end (:func:`~.scheduler.guided_sizes` over the GPU workers,
        or the CPU workers when there is no GPU worker)."""
        if self.part_frames != _AUTO:
            return None
        n_fast = sum(s.kind == "gpu" for s in self.specs) or len(self.specs)
        return guided_sizes(n_frames, n_fast)

    @staticmethod
    def _poll(conn):
        try:
            return conn.poll()
        except (OSError, EOFError):
            return False

    def _frames_text(self, computations, idx):
        if idx is None:
            return "before its first part"
        fr = computations[idx][:, 1]
        return f"on frames {fr[0]}..{fr[-1]} (part {idx})" if len(fr) else f"on part {idx}"

    def _raise_remote(self, w, msg, computations):
        idx, tname, text, tb, blob = msg
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
    def _shutdown(workers, graceful, wait=True):
        """End `workers`: told to stop (`graceful`, idle ones) or terminated. Those ended
        are waited for (then killed after 5 s), in this thread; with ``wait=False`` they
        are terminated and left to :func:`reap_ended`, which the next run (and the
        interpreter's exit) calls without blocking. No thread reaps them: a thread alive
        in the parent when it forks the next run's processes deadlocked a forked child
        under the sanitizers' allocator (benchmarks/NOTES.md)."""
        stopped = []
        for w in workers:
            if w.proc.exitcode is not None:
                continue
            if graceful and w.status in ("idle", "starting") and w.status != "busy":
                try:
                    w.conn.send(Stop())
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
        ended = [w.proc for w in workers if w not in stopped]
        for w in workers:
            try:
                w.conn.close()
            except Exception:  # noqa: BLE001, S110 - closing anyway
                pass
            w.status = "ended"
        if wait:
            _reap(ended)
        else:
            _ended_unreaped.extend((p, time.monotonic()) for p in ended)


#: processes terminated without being waited for (a cold run's readers): (process, when)
_ended_unreaped: list = []


def reap_ended(kill_after=5.0):
    """Reap the processes :meth:`NodeBackend._shutdown` terminated without waiting (a cold
    run's readers: tearing down 28 processes, each with its Universe and a mapping of
    the run's rings, took 0.10-0.16 s of every cold run's end on 2x H200). Never blocks:
    those that have exited are reaped (``exitcode`` polls ``waitpid`` with ``WNOHANG``);
    one still there `kill_after` seconds after its SIGTERM gets SIGKILL."""
    now = time.monotonic()
    keep = []
    for p, when in _ended_unreaped:
        if p.exitcode is None:
            if now - when > kill_after:
                p.kill()
            keep.append((p, when))
    _ended_unreaped[:] = keep


def _reap_at_exit():
    procs = [p for p, _ in _ended_unreaped]
    _ended_unreaped.clear()
    _reap(procs, timeout=2.0)


atexit.register(_reap_at_exit)


def _reap(procs, timeout=5.0):
    """Wait for terminated processes `procs` (at most `timeout` s in all), then kill and
    wait for those still there."""
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.exitcode is None:
            p.kill()
            p.join(1.0)


class _NodeRun:
    """One run of a :class:`NodeBackend`: its processes, their messages and the scheduler.

    Each message a worker sends has a method (``on_hello``, ``on_ready``, ``on_done``,
    ``on_cancelled``, ``on_more``, ``on_error``); which part goes where is the
    :class:`~.scheduler.Scheduler`'s choice.
    """

    def __init__(self, backend, func, computations, payload_bytes=None):
        import multiprocessing as mp

        self.backend, self.func, self.computations = backend, func, computations
        self.mp = mp
        n = len(computations)
        self.sizes = [len(c) for c in computations]
        self.results = [None] * n
        self.ok = False
        analysis = _analysis_of(func)
        self.analysis = analysis
        plan_device = getattr(analysis, "_plan_device", None)
        device = plan_device() if plan_device is not None else getattr(analysis, "device", "auto")
        can_feed = getattr(analysis, "_can_feed", None)
        feedable = bool(can_feed()) if can_feed is not None else False
        device = device if isinstance(device, str) else "auto"
        if device == "cpu" and getattr(analysis, "device", "cpu") != "cpu":
            # an analysis without GPU kernels (InterRDF_s): CPU workers whatever the GPUs
            plan = plan_workers(backend.topology, device="cpu", feedable=feedable,
                                **{**backend.options, "gpus": None, "hybrid": _AUTO})
        else:
            plan = backend.plan(device, feedable)
        self.reader_specs = [s for s in plan if s.kind == "reader"]
        self.specs = [s for s in plan if s.kind != "reader"][:n]
        # a worker that does not fork imports the main script again: not if that reruns this
        methods = sorted({s.start_method for s in self.specs + self.reader_specs} - {"fork"})
        where = unguarded_main_call() if methods else None
        if where is not None:
            raise main_guard_error(where, methods, any(s.kind == "gpu" for s in self.specs))
        # (its Universes apart: a warm engine's processes keep theirs, payload.py)
        self.payload = (payload_bytes if payload_bytes is not None
                        else payload.dumps(_quiet(func), _analysis_of(func)))
        # A forked worker inherits the payload; the others get it through their pipe once
        # they say "hello": Python writes a spawned process's arguments to it before the
        # child reads them, and would wait for ever on one that died while starting.
        self.to_send = 0
        self.rings, self.filled, self.tasks, self.preissue = {}, {}, None, []
        self.all_mapped = self.reused_rings = self.rings_kept = False
        self.lookahead = {}  # rank -> frames a fed worker reads ahead
        self.flags = None
        self.workers: list[_Worker] = []
        self.readers: list[_Worker] = []
        self.by_rank = {}
        self.t_start = time.perf_counter()
        self.bar = backend._progress_bar(sum(self.sizes))
        self.timeline = {"first_ready_s": None, "first_part_s": None, "parts_done_s": []}
        self.sched = None
        self.payload_file = None

    # -- start ---------------------------------------------------------------------------
    def start(self):
        """The run's processes: a warm engine's, or new ones; the readers' first frames."""
        specs, reader_specs = self.specs, self.reader_specs
        pool = self.backend._pool
        if pool is not None:
            pool.settle(SETTLE_S)  # workers the last run left stopping a cancelled copy
        if pool is not None and not pool.fits(specs + reader_specs):
            pool.close()  # another plan (device, readers): new processes
        live = pool.live() if pool is not None else {}
        for w in list(pool.procs.values()) if pool is not None else []:
            if w.spec.rank not in live:  # ended between runs: its error, or a new one
                self.replace(w, pool)
        self.gen = pool.next_gen() if pool is not None else 0
        if reader_specs:
            self._make_feed(pool, all(s.rank in live for s in specs + reader_specs))
        self.flags = CancelFlags.new(len(self.computations),
                                     ring_directory(len(self.computations)))
        states = [WorkerState(s.rank, "gpu" if s.kind == "gpu" else "cpu",
                              fed=bool(self.rings), lookahead=self.lookahead.get(s.rank, 0))
                  for s in specs]
        self.sched = Scheduler(self.sizes, states)
        now = time.perf_counter()
        if live:
            # a warm engine: the same processes take this run's analysis from a file
            self.payload_file = os.path.join(ring_directory(len(self.payload)),
                                             f"mdakit-fastrdf-run-{os.getpid()}-{self.gen}")
            with open(self.payload_file, "wb") as f:
                f.write(self.payload)
        for spec in specs + reader_specs:
            first, feed, light = self._feed_of(spec, now)
            w = live.get(spec.rank)
            if w is not None:
                w.reset()
                try:
                    w.conn.send(Run(self.payload_file, light, self.flags.spec(), self.gen))
                except OSError:
                    w = self.replace(w, pool)
            if w is None:
                w = self._launch(spec, feed, pooled=pool is not None)
            (self.readers if spec.kind == "reader" else self.workers).append(w)
            self.by_rank[spec.rank] = w
            if first:
                w.status = "busy"
                w.unsent = [Part(idx, self.computations[idx]) for idx in first]
                if w.has_payload:
                    self.send_unsent(w)
        if pool is not None:
            pool.adopt(specs + reader_specs, self.workers + self.readers, self.tasks,
                       self.filled)
        # the readers' first frames, once every process is started (a put starts the
        # queue's feeder thread here: no fork after it)
        # (in turn: each worker's first frame, then each one's second, ...: the readers'
        # first round serves every worker)
        for task in sorted(self.preissue, key=lambda t: (t.position, t.rank)):
            self.tasks.put(task)
        if not self.to_send:
            self.payload = None

    def _make_feed(self, pool, all_live=False):
        """One ring of frame slots per compute worker (feed.py), and the readers' queues (a
        warm engine's, or new ones of the spawn context, which serve forked and spawned
        processes alike).

        A warm engine whose processes all served the last run reuses that run's rings
        when they are large enough (same rows per frame, as many slots or more): its
        processes kept their mappings, so nothing is freed, created or faulted in again
        (~0.15 s a GB). The last run must have ended with every process having mapped
        them and no reading outstanding (:attr:`_Pool.rings`)."""
        specs, n_readers = self.specs, len(self.reader_specs)
        n_rows = self.analysis._feed_rows()
        slot_bytes = 12 * n_rows + 256
        # Slots: at least one per reader and two more; up to FEED_RING_BYTES per worker, so
        # that the readers read ahead while a GPU worker starts (imports, CUDA: ~1 s), and
        # no more than a worker's share of the frames
        # The readers read for the fast workers: the GPU workers when there are any (a CPU
        # worker beside them computes a frame while they compute a hundred: a small ring,
        # and no share of the readers). Sized by all the workers, the GPU worker of a
        # hybrid plan read ahead too little and waited for each part's first frames (2x
        # H200, XTC: 0.41 s against 0.02 s alone, benchmarks/NOTES.md)
        fast = [s for s in specs if s.kind == "gpu"] or specs
        share = math.ceil(sum(self.sizes) / len(fast)) + 1
        n_slots = max(3, math.ceil(n_readers / len(fast)) + 2,
                      min(FEED_RING_BYTES // slot_bytes, share, 1024))
        slots = {s.rank: n_slots if s in fast else SLOW_RING_SLOTS for s in specs}
        # a fed worker asks for its next part when fewer frames than this are known ahead:
        # twice its share of the readers, so that every reader has a frame
        ahead = min(n_slots, 2 * math.ceil(n_readers / len(fast)) + 2)
        self.lookahead = {s.rank: ahead if s in fast else SLOW_RING_SLOTS - 1 for s in specs}
        where = ring_directory(sum(slots.values()) * slot_bytes)
        if pool is not None and pool.tasks is not None:
            self.tasks, self.filled = pool.tasks, pool.filled
        else:
            qctx = self.mp.get_context("spawn")
            self.tasks = qctx.Queue()
            self.filled = {spec.rank: qctx.Queue() for spec in specs}
        kept = pool.rings if pool is not None and all_live else {}
        if kept and all(s.rank in kept and kept[s.rank].n_rows == n_rows
                        and kept[s.rank].n_slots >= slots[s.rank] for s in specs):
            self.rings = {s.rank: kept[s.rank] for s in specs}
            self.reused_rings = True
            return
        if pool is not None:
            pool.rings = {}  # (their processes unmap them as this run starts)
        for spec in specs:
            # the parent only names the file: it does not keep it mapped, so that the
            # last process to unmap a ring (which frees its ~1 GB) is a worker or reader
            # between runs or after its end, not the parent before run() returns
            ring = self.rings[spec.rank] = Ring.new(slots[spec.rank], n_rows, where)
            ring.close()

    def _feed_of(self, spec, now):
        """``(first parts, feed, feed without its queues)`` of a process: a fed worker gets
        its first parts now, and the readers start on their frames while it starts (a GPU
        worker: imports, CUDA)."""
        if spec.kind == "reader":
            light = {r: g.spec() for r, g in self.rings.items()}
            return [], ("reader", self.tasks, light, self.filled), light
        if not self.rings:
            return [], None, None
        first = self.sched.initial(spec.rank, now)
        ring = self.rings[spec.rank]
        frames = [int(f) for i in first for f in self.computations[i][:, 1]]
        pre = frames[: ring.n_slots]
        self.preissue.extend(Reading(self.gen, spec.rank, pos % ring.n_slots, pos, frame)
                             for pos, frame in enumerate(pre))
        ahead = self.lookahead[spec.rank]
        feed = (ring.spec(), self.tasks, self.filled[spec.rank], len(pre), ahead)
        return first, feed, (ring.spec(), len(pre), ahead)

    def _launch(self, spec, feed, pooled):
        """A new process for `spec` (forked ones inherit the pickled analysis; the others
        ask for it with Hello)."""
        ctx = self.mp.get_context(spec.start_method)
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        inherit = spec.start_method == "fork"
        self.to_send += not inherit
        proc = ctx.Process(target=_worker_main, name=f"mdakit-fastrdf-{spec.rank}",
                           args=(child_conn, spec, self.payload if inherit else None,
                                 self.backend.pin, os.getpid(), feed, self.flags.spec(),
                                 self.gen, pooled),
                           daemon=True)
        proc.start()
        child_conn.close()
        return _Worker(spec, proc, parent_conn, has_payload=inherit)

    def replace(self, w, pool):
        """A warm engine's process that ended between runs: the error it left, if any, is
        raised; one that left none (killed) is replaced by a new process (None)."""
        w.proc.join(1.0)
        msg = None
        try:
            while w.conn.poll():
                msg = w.conn.recv()
                if isinstance(msg, Failed):
                    break
        except (OSError, EOFError):
            pass
        pool.forget([w])
        if isinstance(msg, Failed):
            self.backend._raise_remote(w, msg, self.computations)

    # -- the loop ------------------------------------------------------------------------
    def loop(self):
        from multiprocessing.connection import wait

        sched = self.sched
        while not sched.finished:
            live = [w for w in self.workers if w.status not in ("stopped", "ended")]
            idle = any(w.status == "idle" for w in live)
            procs = live + self.readers
            ready = wait([w.conn for w in procs] + [w.proc.sentinel for w in procs],
                         timeout=0.05 if idle else 1.0)
            now = time.perf_counter()
            for w in procs:
                if w.conn not in ready and w.proc.sentinel not in ready:
                    continue
                while not sched.finished and NodeBackend._poll(w.conn):
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):  # its end of the pipe closed
                        self.died(w)
                    handler = getattr(self, HANDLERS.get(type(msg), ""), None)
                    if handler is None:
                        raise RuntimeError(f"node backend: unexpected message {msg!r}")
                    handler(w, msg, now)
                if (w.proc.sentinel in ready and not sched.finished
                        and not NodeBackend._poll(w.conn)):
                    self.died(w)
            for rank, idx in sched.idle(now):
                self.send(self.by_rank[rank], [idx])
            for w in self.workers:
                if w.status in ("idle", "busy"):
                    w.status = "busy" if sched.workers[w.spec.rank].outstanding else "idle"

    # -- messages ------------------------------------------------------------------------
    def on_hello(self, w, msg, now):
        """A process that did not fork: its payload, then the parts it was given."""
        try:
            w.conn.send_bytes(self.payload)
        except OSError:  # it died since
            self.died(w)
        w.has_payload = True
        self.to_send -= 1
        if not self.to_send:
            self.payload = None
        self.send_unsent(w)

    def on_ready(self, w, msg, now):
        if msg.info.get("gen", self.gen) != self.gen:
            return  # a reader of a warm engine that had no task in an earlier run
        w.pid, w.cpus, w.mapped = msg.info["pid"], msg.info["cpus"], True
        self.unlink_when_mapped()
        if w.spec.kind == "reader":
            w.status = "reading"
            return
        mark("ready", "parent", rank=w.spec.rank)
        if self.timeline["first_ready_s"] is None:
            self.timeline["first_ready_s"] = now - self.t_start
        if w.status == "starting":
            w.status = "idle"
        self.send(w, self.sched.on_ready(w.spec.rank, now))

    def on_done(self, w, msg, now):
        idx, res, secs, used, wait_s = msg
        w.feed_wait_s += wait_s
        mark("done", "parent", rank=w.spec.rank, part=idx, secs=secs)
        self.timeline["parts_done_s"].append(round(now - self.t_start, 4))
        # when the workers began computing (a GPU worker: after its CUDA context)
        start = round(now - self.t_start - secs, 4)
        if self.timeline["first_part_s"] is None or start < self.timeline["first_part_s"]:
            self.timeline["first_part_s"] = start
        if used is not None:
            w.devices_used.add(used)
        won, cancel, send = self.sched.on_done(w.spec.rank, idx, secs, now, wait_s)
        if won:
            self.results[idx] = res
            if self.bar is not None:
                self.bar.update(self.sizes[idx])
        for c in cancel:
            self.flags.cancel(c)
        self.send(w, send)

    def on_cancelled(self, w, msg, now):
        idx, secs, wait_s = msg
        w.feed_wait_s += wait_s
        self.send(w, self.sched.on_cancelled(w.spec.rank, idx, secs, now))

    def on_more(self, w, msg, now):
        self.send(w, self.sched.on_more(w.spec.rank, now))

    def on_error(self, w, msg, now):
        self.backend._raise_remote(w, msg, self.computations)

    # -- helpers -------------------------------------------------------------------------
    def send(self, w, parts):
        if not parts:
            return
        w.status = "busy"
        w.unsent.extend(Part(idx, self.computations[idx]) for idx in parts)
        if w.has_payload:  # (else once it has had it: on_hello)
            self.send_unsent(w)

    def send_unsent(self, w):
        try:
            for msg in w.unsent:
                w.conn.send(msg)
        except OSError:
            self.died(w)
        w.unsent = []

    def died(self, w):
        w.proc.join(2.0)
        idx = None
        st = self.sched.workers.get(w.spec.rank) if self.sched and w.spec.kind != "reader" else None
        if st is not None and st.outstanding:
            idx = st.outstanding[0]
        w.part = idx
        if w.status == "idle" and idx is not None:
            w.status = "busy"
        self.backend._raise_died(w, self.computations)

    def unlink_when_mapped(self):
        """Once every process of the run has mapped the rings and the cancel flags (it said
        ready), their files go: the mappings stay, and nothing is left behind however the
        run ends."""
        if all(x.mapped for x in self.workers + self.readers):
            self.all_mapped = True
            for ring in self.rings.values():
                ring.unlink()
            if self.flags is not None:
                self.flags.unlink()

    # -- end -----------------------------------------------------------------------------
    def finish(self):
        b = self.backend
        pool = b._pool
        if pool is not None and self.ok:
            # a warm engine keeps its processes: idle workers end the run and wait for the
            # next; one still busy (a cancelled copy) is not waited for
            busy = [w for w in self.workers if w.status == "busy"]
            pool.end_run([w for w in self.workers if w not in busy])
            # the next run may use these rings again: every process mapped them, none is
            # replaced, and no reader still writes into one
            clean = (self.rings and (self.all_mapped or self.reused_rings) and not busy
                     and all(w.status == "idle" and w.drained for w in self.workers))
            pool.rings = dict(self.rings) if clean else {}
            self.rings_kept = bool(clean)
            # a worker still computing a copy whose other copy counted (its part is
            # cancelled: it stops at its next frame) is told the run is over and kept;
            # the next run collects its answer (settle) rather than this one ending it
            pool.end_later(busy)
            if self.tasks is not None:
                for _ in self.readers:  # each unmaps the run's rings while it waits
                    self.tasks.put(RunOver(self.gen))
        else:
            if pool is not None:
                pool.forget(self.workers + self.readers)
            # they hold nothing: terminated first and not waited for (reap_ended)
            b._shutdown(self.readers, graceful=False, wait=False)
            mark("readers_ended", "parent")
            b._shutdown(self.workers, graceful=self.ok)
            mark("workers_ended", "parent")
        if self.payload_file:
            try:
                os.unlink(self.payload_file)
            except FileNotFoundError:
                pass
        for ring in self.rings.values():
            ring.close(unlink=True)
        if self.flags is not None:
            self.flags.close(unlink=True)
        if pool is None or not pool.workers:
            for q in ([self.tasks] if self.tasks is not None else []) + list(self.filled.values()):
                q.close()
                q.cancel_join_thread()
        mark("files_closed", "parent")
        if self.bar is not None:
            self.bar.close()
        states = self.sched.workers if self.sched is not None else {}
        stats = dict(self.sched.stats) if self.sched is not None else {}

        def state(w, key, default=0):
            st = states.get(w.spec.rank)
            return getattr(st, key) if st is not None else default

        return {
            "wall_s": time.perf_counter() - self.t_start,
            **self.timeline,
            "n_parts": len(self.computations),
            "part_sizes": list(self.sizes),
            "n_frames": sum(self.sizes),
            "rings_kept": self.rings_kept,  # (a warm engine's next run may write into them)
            **stats,
            "workers": [
                {"rank": w.spec.rank, "kind": w.spec.kind, "device": w.spec.device,
                 "n_threads": w.spec.n_threads, "start_method": w.spec.start_method,
                 "pid": w.pid, "process": w.proc.pid, "cpus": w.cpus,
                 "parts": state(w, "parts"),
                 "frames": state(w, "frames"), "busy_s": state(w, "busy_s", 0.0),
                 "duplicates": state(w, "duplicates"), "cancelled": state(w, "cancelled"),
                 "feed_wait_s": w.feed_wait_s, "lookahead": self.lookahead.get(w.spec.rank, 0),
                 "devices_used": sorted(w.devices_used)}
                for w in self.workers],
            "readers": [{"rank": w.spec.rank, "pid": w.pid or w.proc.pid,
                         "cpus": w.cpus or list(w.spec.cpus), "mapped": w.mapped}
                        for w in self.readers],
        }


class _Pool:
    """The processes a warm engine (``with NodeBackend() as node:``) keeps between runs:
    compute workers with their engines (a GPU worker's CUDA context), readers, and the
    feed's queues they were started with. A run whose plan differs (another device, an
    analysis without readers) replaces them."""

    def __init__(self):
        self.key, self.procs, self.tasks, self.filled, self.gen = None, {}, None, {}, 0
        # the last run's rings, when the next may reuse them (_NodeRun._make_feed)
        self.rings = {}

    @property
    def workers(self):
        return list(self.procs.values())

    def fits(self, specs):
        return self.key is None or self.key == tuple(specs)

    def live(self):
        return {r: w for r, w in self.procs.items() if w.proc.exitcode is None}

    def next_gen(self):
        self.gen += 1
        return self.gen

    def adopt(self, specs, workers, tasks, filled):
        self.key = tuple(specs)
        self.procs = {w.spec.rank: w for w in workers}
        self.tasks, self.filled = tasks, filled

    def forget(self, workers):
        for w in workers:
            if self.procs.get(w.spec.rank) is w:
                del self.procs[w.spec.rank]
        if workers:
            self.rings = {}  # a process goes: the next run's rings are new
        if not self.procs:
            self.key, self.tasks, self.filled = None, None, {}

    @staticmethod
    def _await_ended(w, deadline):
        """Read `w`'s messages until its :class:`Ended` (then idle, with its `drained`) or
        `deadline` (time.monotonic()); messages of the run that is over are dropped. One
        that does not answer in time, whose pipe breaks or that reports a failure (an error
        of a copy that did not count) is marked gone."""
        while True:
            left = deadline - time.monotonic()
            try:
                if not w.conn.poll(max(0.0, left)):  # (at the deadline: what has come)
                    raise OSError
                msg = w.conn.recv()
            except (OSError, EOFError):
                w.status = "gone"
                return
            if isinstance(msg, Ended):
                w.status, w.drained = "idle", msg.drained
                return
            if isinstance(msg, Failed):
                w.status = "gone"
                return

    def end_run(self, workers):
        """Tell idle compute workers the run is over; wait (briefly) for their answer, so
        that nothing of this run is left in their pipes. One that does not answer is
        ended."""
        deadline = time.monotonic() + 5.0
        for w in workers:
            try:
                w.conn.send(End())
            except OSError:
                w.status = "gone"
        for w in workers:
            if w.status != "gone":
                self._await_ended(w, deadline)
        gone = [w for w in workers if w.status == "gone"]
        NodeBackend._shutdown(gone, graceful=False)
        self.forget(gone)

    def end_later(self, workers):
        """Tell workers still computing a cancelled copy that the run is over; they answer
        :class:`Ended` once the copy stops (at its next frame), which :meth:`settle`
        collects. One the message cannot reach is ended now."""
        gone = []
        for w in workers:
            try:
                w.conn.send(End())
                w.status = "ending"
            except (OSError, ValueError):
                w.status = "gone"
                gone.append(w)
        NodeBackend._shutdown(gone, graceful=False)
        self.forget(gone)

    def settle(self, timeout):
        """Wait up to `timeout` seconds in all for the answers of the workers told by
        :meth:`end_later`; the messages of their cancelled copies are dropped. One that
        has not answered by then (still in a long frame) or has ended is ended and
        forgotten: the run starting now replaces it."""
        ending = [w for w in self.procs.values() if w.status == "ending"]
        if not ending:
            return
        deadline = time.monotonic() + timeout
        for w in ending:
            self._await_ended(w, deadline)
        gone = [w for w in ending if w.status == "gone"]
        NodeBackend._shutdown(gone, graceful=False)
        self.forget(gone)

    def close(self):
        """End every process: readers at once (they wait on their task queue and hold
        nothing), compute workers told to exit (a GPU worker releases its context)."""
        procs = self.workers
        readers = [w for w in procs if w.spec.kind == "reader"]
        workers = [w for w in procs if w.spec.kind != "reader"]
        NodeBackend._shutdown(readers, graceful=False)
        for w in workers:
            try:
                w.conn.send(Exit())
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 2.0
        for w in workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
        NodeBackend._shutdown([w for w in procs if w.proc.exitcode is None], graceful=False)
        for w in procs:
            try:
                w.conn.close()
            except OSError:
                pass
        for q in ([self.tasks] if self.tasks is not None else []) + list(self.filled.values()):
            q.close()
            q.cancel_join_thread()
        self.procs = {}
        self.forget([])
