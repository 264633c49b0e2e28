"""The node backend: :class:`NodeBackend`, its options, plan and warm engine. A run's
events are :class:`.node_run._NodeRun`'s; the processes' ends and the warm engine's pool
are in :mod:`.processes`."""

from __future__ import annotations

import math
import pickle
import signal

from .base import _OwnBackend
from .errors import RemoteTraceback, WorkerDiedError, WorkerError
from .planning import _AUTO, _check_auto_int, _fmt_cpus, plan_workers
from .scheduler import guided_sizes
from .topology import NodeTopology, detect_topology
from .node_run import _NodeRun
from .processes import _Pool, reap_ended
from .trace import mark

__all__ = ["NodeBackend"]


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
        ``libcuda``: :func:`~mdakit_fastrdf.engine.cuda.cuda_used_in_this_process`), which starts
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

    def plan_for(self, analysis) -> list:
        """The workers for `analysis` (:meth:`plan` with the device and feeding it asks for
        through the hooks of :mod:`.protocol`)."""
        plan_device = getattr(analysis, "_plan_device", None)
        device = plan_device() if plan_device is not None else getattr(analysis, "device", "auto")
        can_feed = getattr(analysis, "_can_feed", None)
        feedable = bool(can_feed()) if can_feed is not None else False
        device = device if isinstance(device, str) else "auto"
        if device == "cpu" and getattr(analysis, "device", "cpu") != "cpu":
            # an analysis without GPU kernels (InterRDF_s): CPU workers whatever the GPUs
            return plan_workers(self.topology, device="cpu", feedable=feedable,
                                **{**self.options, "gpus": None, "hybrid": _AUTO})
        return self.plan(device, feedable)

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
