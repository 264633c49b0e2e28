r"""Parallel backends over frames: every GPU and every socket of a node, and dask clusters.

The analysis classes of this package accept, in :meth:`run`, MDAnalysis's own backends
(``'serial'``, ``'multiprocessing'``, ``'dask'``) and two more:

``backend='node'`` (:class:`NodeBackend`)
    One persistent worker process per GPU, bound to its device, and CPU workers placed on
    the sockets / NUMA nodes with their cores (a core is left to each GPU worker, as
    CADISHI does). Frames are cut into many small parts that the workers take from a queue
    as they become free, so a fast GPU worker takes more frames than a CPU worker; near the
    end, an idle fast worker also recomputes a part a much slower worker is still busy
    with, and the first copy to finish counts (the counts are the same either way). Worker
    processes, their CUDA contexts and device buffers live for the whole run.
``backend='dask'`` with a :class:`dask.distributed.Client`
    MDAnalysis's dask backend always starts a local process pool; here, when a distributed
    client is active (or with ``backend=DaskDistributedBackend(client)``), the parts run
    on the client's workers (:class:`DaskDistributedBackend`), on one node or many.

Every backend gives the same integer counts: partial histograms are sums of integers.

Failure behaviour of the node backend: an exception in a worker stops the run at once and
is raised in the caller (the original exception, with the worker's traceback as its
``__cause__``); a worker that dies (killed, out of memory, crashed) ends the run with a
:class:`WorkerDiedError` naming the worker, its signal and its frames; Ctrl-C stops every
worker. No partial result is ever returned.
"""

from __future__ import annotations

import collections
import math
import numbers
import os
import pickle
import signal
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from MDAnalysis.analysis.backends import BackendBase, BackendSerial

from ..engine import WorkerPlacement, available_cpus, set_worker_placement, worker_placement
from .topology import NodeTopology, detect_topology

__all__ = [
    "NodeBackend", "DaskDistributedBackend", "WorkerError", "WorkerDiedError",
    "WorkerSpec", "plan_workers", "ParallelAnalysisMixin",
]


class WorkerError(RuntimeError):
    """A backend worker failed; the message names the worker and its frames."""


class WorkerDiedError(WorkerError):
    """A backend worker process ended without finishing its frames (killed, crashed)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (set as ``__cause__``)."""

    def __init__(self, tb):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return self.tb


class _PartResult:
    """What a worker hands back for one part: all that ``AnalysisBase.run`` reads from the
    objects its backend returns (``frames``, ``times``, ``results``), without the Universe."""

    __slots__ = ("frames", "times", "results")

    def __init__(self, obj):
        # copies: the worker's analysis object runs its next part on the same Results
        # (a dask worker keeps this result in memory while it does)
        from MDAnalysis.analysis.results import Results

        self.frames = np.array(obj.frames, copy=True)
        self.times = np.array(obj.times, copy=True)
        self.results = Results(**obj.results)

    def __getstate__(self):
        return (self.frames, self.times, self.results)

    def __setstate__(self, state):
        self.frames, self.times, self.results = state


def _quiet(func):
    """``func`` (``partial(analysis._compute, ...)``) with the workers' progress bars off."""
    if isinstance(func, partial):
        return partial(func.func, *func.args, **{**(func.keywords or {}), "verbose": False,
                                                  "progressbar_kwargs": {}})
    return func


def _analysis_of(func):
    target = func.func if isinstance(func, partial) else func
    return getattr(target, "__self__", None)


# -- planning ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerSpec:
    """One worker of a :class:`NodeBackend` run.

    ``kind`` is ``'gpu'`` or ``'cpu'``; ``device`` the device it is bound to (``'cuda:k'``
    or ``'cpu'``); ``cpus`` the logical CPUs it is pinned to; ``n_threads`` the CPU threads
    of its kernel; ``start_method`` how its process starts.
    """

    rank: int
    kind: str
    device: str
    cpus: tuple
    n_threads: int
    start_method: str
    engine_device: str | None = None  # differs from device only for CPU stand-ins of GPUs

    def describe(self) -> str:
        cpus = _fmt_cpus(self.cpus)
        return (f"worker {self.rank} ({self.kind}, {self.device}, {self.n_threads} "
                f"thread{'s' if self.n_threads != 1 else ''}, cpus {cpus}, {self.start_method})")


def _fmt_cpus(cpus):
    cpus = sorted(cpus)
    if not cpus:
        return "-"
    out, lo, prev = [], cpus[0], cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{lo}-{prev}" if prev > lo else f"{lo}")
        if c is not None:
            lo = prev = c
    return ",".join(out)


_AUTO = "auto"
_START_METHODS = ("fork", "spawn", "forkserver")


def _check_auto_int(name, value, minimum, fix):
    if isinstance(value, str) and value == _AUTO:
        return _AUTO
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be 'auto' or an integer, got {value!r}; {fix}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum} (or 'auto'), got {value}; {fix}")
    return int(value)


def _check_gpus(gpus, n_visible, source):
    """Normalise the ``gpus`` option to a list of device indices."""
    if gpus is None:
        return []
    if isinstance(gpus, str):
        if gpus == _AUTO:
            return list(range(n_visible))
        raise ValueError(f"gpus must be 'auto', None, a count or a list of GPU indices, got {gpus!r}")
    if isinstance(gpus, bool):
        raise TypeError(f"gpus must be 'auto', None, a count or a list of GPU indices, got {gpus!r}")
    if isinstance(gpus, numbers.Integral):
        if gpus < 0:
            raise ValueError(f"gpus={gpus}: a count of GPUs must be >= 0")
        if gpus > n_visible:
            raise ValueError(
                f"gpus={gpus}, but this process sees {n_visible} GPU(s) ({source}); use "
                f"gpus='auto' or at most {n_visible}")
        return list(range(int(gpus)))
    try:
        ids = list(gpus)
    except TypeError:
        raise TypeError(f"gpus must be 'auto', None, a count or a list of GPU indices, got {gpus!r}") from None
    for g in ids:
        if isinstance(g, bool) or not isinstance(g, numbers.Integral):
            raise TypeError(f"gpus={gpus!r}: GPU indices must be integers (0, 1, ...)")
        if not 0 <= g < n_visible:
            raise ValueError(
                f"gpus={gpus!r}: there is no GPU {g}; this process sees {n_visible} GPU(s) "
                f"({source}), numbered 0..{n_visible - 1} (after CUDA_VISIBLE_DEVICES)")
    if len(set(ids)) != len(ids):
        raise ValueError(f"gpus={gpus!r}: each GPU may appear once (one worker per GPU)")
    return [int(g) for g in ids]


def plan_workers(topology: NodeTopology, *, device="auto", gpus=_AUTO, cpu_workers=_AUTO,
                 threads_per_worker=_AUTO, hybrid=_AUTO, n_workers=None, start_method=None,
                 gpu_start_method="spawn", gpu_standin=False) -> list:
    """Decide the workers of a :class:`NodeBackend` run on ``topology``.

    GPU workers come first, one per GPU in `gpus`, each pinned to one core of its own,
    taken in turn from the CPU groups (sockets / NUMA nodes). The remaining cores of each
    group go to its CPU workers (two per group by default, so that one reads and prepares
    a frame while the other computes; one when the group has a single free core), split
    into contiguous blocks of cores, one thread per physical core. See
    :class:`NodeBackend` for the options. Returns a list of :class:`WorkerSpec`.
    """
    cpu_workers = _check_auto_int("cpu_workers", cpu_workers, 0,
                                  "it is the number of CPU worker processes")
    threads_per_worker = _check_auto_int("threads_per_worker", threads_per_worker, 1,
                                         "it is the number of CPU threads of each CPU worker")
    if n_workers is not None:
        n_workers = _check_auto_int("n_workers", n_workers, 1, "it is the total number of workers")
    if not (hybrid == _AUTO or isinstance(hybrid, bool)):
        raise TypeError(f"hybrid must be 'auto', True or False, got {hybrid!r}")
    if start_method is not None and start_method not in _START_METHODS:
        raise ValueError(f"start_method must be None, 'fork', 'spawn' or 'forkserver', got {start_method!r}")
    if gpu_start_method not in ("spawn", "forkserver"):
        raise ValueError(
            f"gpu_start_method must be 'spawn' or 'forkserver', got {gpu_start_method!r}: "
            "CUDA cannot be used in a process forked from one that may have used it")
    import multiprocessing as mp

    cpu_method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")

    device = str(device)
    if device == "cpu":
        if gpus not in (_AUTO, None, 0, [], ()):
            raise ValueError(
                f"gpus={gpus!r} with device='cpu': the analysis runs on the CPU only; use "
                "device='auto' (or 'cuda') to use GPU workers, or leave gpus out")
        gpu_ids = []
    else:
        gpu_ids = _check_gpus(gpus, topology.n_gpus, topology.gpu_source or topology.source)
    if n_workers is not None:
        gpu_ids = gpu_ids[:n_workers]
    wants_gpu = device.startswith("cuda")
    if wants_gpu and not gpu_ids:
        raise ValueError(
            f"device={device!r} needs GPU workers, but none are planned (GPUs seen: "
            f"{topology.n_gpus}, {topology.gpu_source or 'none'}; gpus={gpus!r}). Use "
            "device='auto' to run on the CPUs, or name the GPUs with gpus=[...]")
    if hybrid == _AUTO:
        use_cpu = not wants_gpu
    else:
        use_cpu = hybrid
        if hybrid and wants_gpu:
            raise ValueError(
                f"hybrid=True adds CPU workers, but device={device!r} asks for every frame "
                "on a GPU; use device='auto' for GPU and CPU workers, or hybrid=False")
    if not gpu_ids:
        if hybrid is False:
            raise ValueError(
                "hybrid=False leaves no workers: no GPU worker is planned (GPUs seen: "
                f"{topology.n_gpus}); use hybrid='auto' or name GPUs with gpus=[...]")
        use_cpu = True
    if cpu_workers != _AUTO and cpu_workers > 0 and not use_cpu:
        raise ValueError(
            f"cpu_workers={cpu_workers} with hybrid={hybrid!r} and device={device!r}: CPU "
            "workers run only in hybrid mode; pass hybrid=True (and device='auto')")

    # free physical cores of each group (each a tuple of logical cpus)
    free = [list(g.cores) if g.cores else [(c,) for c in g.cpus] for g in topology.groups]
    specs = []
    for k, gid in enumerate(gpu_ids):
        order = sorted(range(len(free)), key=lambda g: (-len(free[g]), (g - k) % len(free)))
        g = order[0]
        if free[g]:
            core = free[g].pop()
        else:  # more GPUs than cores: share the group
            core = tuple(c for c in topology.groups[k % len(free)].cpus)
        specs.append(WorkerSpec(
            len(specs), "gpu", f"cuda:{gid}", tuple(core), 1, gpu_start_method,
            engine_device="cpu" if gpu_standin else f"cuda:{gid}"))

    if use_cpu:
        n_free = [len(f) for f in free]
        total_free = sum(n_free)
        if cpu_workers == _AUTO:
            per_group = [min(2, n) for n in n_free]
            if n_workers is not None:
                per_group = _spread(n_workers - len(specs), n_free)
        else:
            if n_workers is not None and n_workers != len(specs) + cpu_workers:
                raise ValueError(
                    f"n_workers={n_workers} but {len(specs)} GPU worker(s) + cpu_workers="
                    f"{cpu_workers}; give one of them, or make them agree")
            if cpu_workers > total_free:
                raise ValueError(
                    f"cpu_workers={cpu_workers}, but only {total_free} core(s) are free for "
                    f"CPU workers ({len(specs)} reserved for GPU workers); use at most "
                    f"{total_free} or 'auto'")
            per_group = _spread(cpu_workers, n_free)
        for g, n in enumerate(per_group):
            if n <= 0:
                continue
            cores = free[g]
            for j in range(n):
                lo, hi = (j * len(cores)) // n, ((j + 1) * len(cores)) // n
                block = cores[lo:hi]
                cpus = tuple(c for core in block for c in core)
                threads = len(block) if threads_per_worker == _AUTO else threads_per_worker
                specs.append(WorkerSpec(len(specs), "cpu", "cpu", cpus, max(1, threads),
                                        cpu_method, engine_device="cpu"))
    if not specs:
        raise ValueError(
            "no workers could be planned: no GPU and no free core "
            f"(topology: {len(topology.groups)} group(s), {topology.n_cpus} cpu(s), "
            f"{topology.n_gpus} GPU(s))")
    return specs


def _spread(n, capacity):
    """``n`` workers over groups in turn, at most ``capacity[g]`` in group ``g``."""
    out = [0] * len(capacity)
    n = max(0, n)
    if n > sum(capacity):
        raise ValueError(
            f"{n} CPU workers asked for, but only {sum(capacity)} core(s) are free; "
            "ask for fewer workers")
    g = 0
    while n > 0:
        if out[g] < capacity[g]:
            out[g] += 1
            n -= 1
        g = (g + 1) % len(capacity)
    return out


# -- node backend: worker side -----------------------------------------------------------


def _die_with_parent():
    """Ask Linux to kill this worker when the process that started it dies."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - not Linux / no libc
        pass


_private_lock_pid = None


def _private_progress_lock():
    """Give this worker process progress-bar locks of its own (once per process).

    tqdm, under MDAnalysis's ``ProgressBar``, guards its bars with a lock holding a
    multiprocessing semaphore that is created once and inherited by forked processes, and
    every part a worker computes creates and closes a bar (hidden or not). A worker killed
    inside that short critical section (by the node backend when it stops a straggler's
    duplicate or the other workers of a failed run, by the OOM killer, by a user) would
    leave the semaphore taken for ever, and the next progress bar of the process that
    called ``run()`` would wait on it for ever. A worker therefore never touches the shared
    one; its own bars do not need to be coordinated with other processes.
    """
    global _private_lock_pid
    pid = os.getpid()
    if _private_lock_pid == pid:
        return
    from MDAnalysis.lib.log import ProgressBar
    from tqdm import tqdm

    lock = threading.RLock()
    tqdm.set_lock(lock)
    ProgressBar.set_lock(lock)
    # any other bar class that made a lock of its own before the fork (tqdm.auto, ...)
    todo = list(tqdm.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "_lock" in vars(cls):
            cls.set_lock(lock)
    _private_lock_pid = pid


def _worker_main(conn, spec: WorkerSpec, payload: bytes, pin: bool, parent_pid: int):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it stops us on Ctrl-C
    _die_with_parent()
    # The caller died before prctl? A forked or spawned worker is the caller's child; one
    # from a fork server is the server's child (the server dies with the caller, and this
    # worker with the server), so there ask whether the caller still exists.
    if spec.start_method == "forkserver":
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # pragma: no cover - exists, owned by another user
            pass
    elif os.getppid() != parent_pid:
        os._exit(1)
    idx = None
    try:
        if pin and spec.cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, spec.cpus)
        set_worker_placement(WorkerPlacement(
            device=spec.engine_device, n_threads=spec.n_threads, rank=spec.rank,
            kind=spec.kind, bound_device=spec.device))
        _private_progress_lock()
        func = pickle.loads(payload)
        del payload
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        conn.send(("ready", spec.rank, {"pid": os.getpid(), "cpus": cpus}))
        while True:
            msg = conn.recv()
            if msg[0] == "stop":
                break
            _, idx, computation = msg
            t0 = time.perf_counter()
            obj = func(computation)
            # the device the part really ran on (the engine's, once it has run a frame)
            used = getattr(getattr(obj, "_engine", None), "device_used", None)
            conn.send(("done", idx, _PartResult(obj), time.perf_counter() - t0, used))
            idx = None
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent has gone or closed our pipe
    except BaseException as exc:  # noqa: BLE001 - everything goes to the parent
        tb = traceback.format_exc()
        try:
            blob = pickle.dumps(exc)
            pickle.loads(blob)
        except Exception:
            blob = None
        try:
            conn.send(("error", idx, f"{type(exc).__module__}.{type(exc).__qualname__}",
                       str(exc), tb, blob))
        except Exception:
            pass
    finally:
        try:
            conn.close()
        except Exception:
            pass


# -- node backend: parent side -----------------------------------------------------------


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

    def rate(self):
        return self.frames / self.busy_s if self.busy_s > 0 else None


class _OwnBackend(BackendBase):
    """Backends of this package: :meth:`run` of the package's analyses accepts them
    without ``unsupported_backend=True``, shows their progress bar, and lets them choose
    the number of parts and each worker's threads."""

    _progress = (False, {})

    def parts_for(self, n_frames: int) -> int:
        return max(1, min(n_frames, 8 * self.n_workers))

    def _progress_bar(self, total):
        verbose, kwargs = self._progress
        if not verbose:
            return None
        from MDAnalysis.lib.log import ProgressBar

        kwargs = dict(kwargs)
        kwargs.setdefault("desc", f"{type(self).__name__}")
        return ProgressBar(total=total, verbose=True, **kwargs)


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
    gpu_start_method : {'spawn', 'forkserver'}, optional
        How GPU workers start; never ``'fork'`` (CUDA does not survive a fork).
    pin : bool, optional
        Pin each worker to its cores with :func:`os.sched_setaffinity` (default True).
    topology : NodeTopology, optional
        The node to plan for (default: read from ``/sys/devices/system`` and the GPU count).

    Notes
    -----
    **Binding.** Each worker process calls
    :func:`mdakit_fastrdf._engine.set_worker_placement` before it unpickles the analysis.
    In a GPU worker bound to GPU ``k``, the analysis's ``device='auto'`` runs on GPU ``k``
    (the CPU for frames below :data:`~mdakit_fastrdf._engine.AUTO_GPU_MIN_PAIRS` pairs) and
    ``device='cuda[:N]'`` on GPU ``k``; choose GPUs with `gpus`. In a CPU worker ``'auto'``
    runs on the CPU with the worker's threads. ``device='cpu'`` plans CPU workers only,
    ``device='cuda'`` GPU workers only.

    **Load balancing.** The frames are cut into parts; each worker asks for the next part
    when it has finished one. When the queue is empty, an idle worker recomputes a part that
    another worker has been busy with for more than 1.5 times what the idle worker needs for
    it (measured rates), and the first copy to finish counts: a slow CPU worker cannot hold
    back the end of a run (CADISHI saw this tail in its hybrid runs).

    **Failures.** See the module documentation: exceptions are raised in the caller with the
    worker's traceback, a dead worker raises :class:`WorkerDiedError` as soon as its process
    ends, Ctrl-C terminates all workers. Workers also die with the calling process.

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
                 gpu_start_method="spawn", pin=True, topology=None, _gpu_standin=False):
        if topology is not None and not isinstance(topology, NodeTopology):
            raise TypeError(f"topology must be a NodeTopology or None, got {type(topology).__name__}")
        if not isinstance(pin, bool):
            raise TypeError(f"pin must be True or False, got {pin!r}")
        self.part_frames = _check_auto_int("part_frames", part_frames, 1,
                                           "it is the number of frames per part")
        self.topology = topology if topology is not None else detect_topology()
        self.options = dict(gpus=gpus, cpu_workers=cpu_workers,
                            threads_per_worker=threads_per_worker, hybrid=hybrid,
                            n_workers=n_workers, start_method=start_method,
                            gpu_start_method=gpu_start_method, gpu_standin=bool(_gpu_standin))
        self.pin = pin
        self.specs = self.plan("auto")
        self.last_run = None
        super().__init__(len(self.specs))

    def plan(self, device="auto") -> list:
        """The workers for an analysis with this `device` (a list of :class:`WorkerSpec`)."""
        return plan_workers(self.topology, device=device, **self.options)

    def parts_for(self, n_frames: int) -> int:
        """Parts to cut ``n_frames`` into: ``part_frames`` each, or (``'auto'``) eight per
        worker, so that a worker that runs faster (a GPU beside CPU workers, or a core that
        shares less with its neighbours) takes more of them. A part costs a message and the
        analysis's set-up, no extra frame read (workers do not rewind the trajectory)."""
        if self.part_frames != _AUTO:
            return max(1, math.ceil(n_frames / self.part_frames))
        return max(1, min(n_frames, 8 * self.n_workers))

    def describe(self, device="auto") -> str:
        """The plan as text, one worker per line."""
        t = self.topology
        head = (f"node: {len(t.groups)} CPU group(s) ({t.source}): "
                + "; ".join(f"{g.name} cpus {_fmt_cpus(g.cpus)} ({g.n_cores} cores)" for g in t.groups)
                + f"; {t.n_gpus} GPU(s) ({t.gpu_source or t.source})")
        return "\n".join([head] + ["  " + s.describe() for s in self.plan(device)])

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
        device = getattr(analysis, "device", "auto")
        specs = self.plan(device if isinstance(device, str) else "auto")[:n]
        payload = pickle.dumps(_quiet(func), protocol=pickle.HIGHEST_PROTOCOL)
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
        dup_assigned = set()
        ok = False
        try:
            for spec in specs:
                ctx = mp.get_context(spec.start_method)
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, name=f"mdakit-fastrdf-{spec.rank}",
                                   args=(child_conn, spec, payload, self.pin, os.getpid()),
                                   daemon=True)
                proc.start()
                child_conn.close()
                workers.append(_Worker(spec, proc, parent_conn))
            del payload

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

            while n_done < n:
                live = [w for w in workers if w.status not in ("stopped", "ended")]
                idle = any(w.status == "idle" for w in live)
                objs = [w.conn for w in live] + [w.proc.sentinel for w in live]
                ready = wait(objs, timeout=0.05 if idle else 1.0)
                now = time.perf_counter()
                for w in live:
                    if w.conn in ready or w.proc.sentinel in ready:
                        while n_done < n and self._poll(w.conn):
                            try:
                                msg = w.conn.recv()
                            except (EOFError, OSError):  # its end of the pipe closed
                                w.proc.join(2.0)
                                self._raise_died(w, computations)
                            kind = msg[0]
                            if kind == "ready":
                                w.pid, w.cpus = msg[2]["pid"], msg[2]["cpus"]
                                assign(w, now)
                            elif kind == "done":
                                _, idx, res, secs, used = msg
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
                                if n_done < n:
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
            self._shutdown(workers, graceful=ok)
            if bar is not None:
                bar.close()
            self.last_run = {
                "wall_s": time.perf_counter() - t_start,
                "n_parts": n,
                "n_frames": sum(sizes),
                **stats,
                "workers": [
                    {"rank": w.spec.rank, "kind": w.spec.kind, "device": w.spec.device,
                     "n_threads": w.spec.n_threads, "start_method": w.spec.start_method,
                     "pid": w.pid, "cpus": w.cpus, "parts": w.parts, "frames": w.frames,
                     "busy_s": w.busy_s, "duplicates": w.duplicates,
                     "devices_used": sorted(w.devices_used)}
                    for w in workers],
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
            except Exception:
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
        doing = (self._frames_text(computations, w.part) if w.status == "busy"
                 else "while starting (see its output above)" if w.status == "starting"
                 else "while idle")
        hint = ""
        if code == -signal.SIGKILL:
            hint = " A SIGKILL often means the operating system ran out of memory (dmesg)."
        raise WorkerDiedError(
            f"node backend {w.spec.describe()}, pid {w.pid or w.proc.pid}, {how} {doing}; "
            f"the run was stopped and no result was produced.{hint}")

    @staticmethod
    def _shutdown(workers, graceful):
        for w in workers:
            if w.proc.exitcode is not None:
                continue
            if graceful and w.status in ("idle", "starting") and w.status != "busy":
                try:
                    w.conn.send(("stop",))
                    w.status = "stopped"
                    continue
                except (OSError, ValueError):
                    pass
            w.proc.terminate()
        deadline = time.monotonic() + 5.0
        for w in workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
        for w in workers:
            if w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join(1.0)
            try:
                w.conn.close()
            except Exception:
                pass
            w.status = "ended"


# -- dask.distributed ----------------------------------------------------------------------

_dask_cache: dict = {}
_dask_lock = threading.Lock()


def _dask_part(payload, token, computation, threads):
    """Run one part on a dask worker; the unpickled analysis is kept per run and thread."""
    key = (token, threading.get_ident())
    with _dask_lock:
        func = _dask_cache.get(key)
        if func is None:
            for k in [k for k in _dask_cache if k[0] != token]:
                del _dask_cache[k]
    if func is None:
        func = pickle.loads(payload)
        with _dask_lock:
            _dask_cache[key] = func
    placement = worker_placement()
    if placement is None or placement.n_threads != threads or placement.device is not None:
        set_worker_placement(WorkerPlacement(device=None, n_threads=threads, kind="dask"))
    return _PartResult(func(computation))


def _default_client():
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


class DaskDistributedBackend(_OwnBackend):
    r"""Run the parts on the workers of a :class:`dask.distributed.Client`.

    MDAnalysis's ``'dask'`` backend calls ``dask.compute(..., scheduler='processes')`` and so
    always starts a local process pool, whatever client is active. The analyses of this
    package use this backend instead for ``backend='dask'`` whenever a distributed client is
    active (:func:`distributed.default_client`), or when given explicitly.

    Parameters
    ----------
    client : distributed.Client, optional
        Default: the active client.
    n_workers : int, optional
        Number of workers to plan parts for (default: the cluster's workers).
    threads_per_worker : 'auto' or int, optional
        CPU threads of each worker's kernel. ``'auto'``: the cores the worker process may
        use, divided by the number of workers on its host. An analysis's own ``n_threads``
        wins.
    parts_per_worker : int, optional
        Parts per worker (default 4): dask hands the next part to the first free worker.
    resources : dict, optional
        Worker resources each part needs, e.g. ``{'GPU': 1}`` with workers started with
        ``--resources GPU=1``.

    Notes
    -----
    Each worker process unpickles the analysis once per run (and thread) and runs its
    parts on it. For GPUs start one worker process per GPU with one thread, each seeing
    its GPU as device 0 (``CUDA_VISIBLE_DEVICES``), e.g. with dask-cuda's
    ``LocalCUDACluster`` or the dask-jobqueue / dask-mpi recipes in the docs; the analysis's
    ``device='auto'`` then uses that GPU.
    """

    def __init__(self, client=None, n_workers=None, *, threads_per_worker=_AUTO,
                 parts_per_worker=4, resources=None):
        if client is None:
            client = _default_client()
            if client is None:
                raise ValueError(
                    "DaskDistributedBackend: no dask.distributed Client is active; create one "
                    "(client = distributed.Client(...)) or pass client=...")
        if not hasattr(client, "submit") or not hasattr(client, "scheduler_info"):
            raise TypeError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
        self.client = client
        self.threads_per_worker = _check_auto_int(
            "threads_per_worker", threads_per_worker, 1, "it is the CPU threads per dask worker")
        self.parts_per_worker = _check_auto_int("parts_per_worker", parts_per_worker, 1,
                                                "it is the number of parts per worker")
        if resources is not None and not isinstance(resources, dict):
            raise TypeError(f"resources must be a dict such as {{'GPU': 1}}, got {resources!r}")
        self.resources = resources
        if n_workers is None:
            n_workers = max(1, len(self._workers()))
        super().__init__(n_workers)

    def _workers(self):
        try:
            return self.client.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # older distributed
            return self.client.scheduler_info()["workers"]

    def parts_for(self, n_frames: int) -> int:
        return max(1, min(n_frames, self.parts_per_worker * self.n_workers))

    def apply(self, func, computations):
        """Submit one task per computation to the client; return the results in order."""
        from distributed import as_completed

        try:
            import cloudpickle as _pickler
        except ImportError:  # pragma: no cover
            _pickler = pickle
        computations = list(computations)
        if not computations:
            return []
        token = uuid.uuid4().hex
        payload = self.client.scatter(_pickler.dumps(_quiet(func)), broadcast=True, hash=False)
        if self.threads_per_worker == _AUTO:
            # resolved on each worker: its cores / (worker processes on its host x its threads)
            threads = dict(collections.Counter(w.get("host") for w in self._workers().values()))
        else:
            threads = self.threads_per_worker
        futures = [
            self.client.submit(_dask_task, payload, token, comp, threads, pure=False,
                               key=f"mdakit-fastrdf-{token}-{i}", resources=self.resources)
            for i, comp in enumerate(computations)
        ]
        bar = self._progress_bar(sum(len(c) for c in computations))
        sizes = {f.key: len(c) for f, c in zip(futures, computations)}
        try:
            for fut in as_completed(futures):
                if fut.status == "error":
                    fut.result()  # raises the worker's exception with its traceback
                if bar is not None:
                    bar.update(sizes[fut.key])
            return [f.result() for f in futures]
        finally:
            if bar is not None:
                bar.close()
            self.client.cancel(futures + [payload])


def _dask_task(payload, token, computation, threads):
    if isinstance(threads, dict):  # 'auto': {host: worker processes on it}
        try:
            from distributed import get_worker

            w = get_worker()
            host = w.address.split("://")[-1].rsplit(":", 1)[0]
            share = threads.get(host, 1) * max(1, int(w.state.nthreads))
        except Exception:  # pragma: no cover - not on a dask worker
            share = 1
        threads = max(1, available_cpus() // share)
    return _dask_part(payload, token, computation, threads)


# -- the analyses' side ------------------------------------------------------------------


def _resolve_backend(backend, n_workers):
    """Map the short names of this package's backends to backend objects."""
    if isinstance(backend, str):
        name = backend.lower()
        if name == "node":
            return NodeBackend(n_workers=n_workers)
        if name == "dask" and _default_client() is not None:
            return DaskDistributedBackend(n_workers=n_workers)
    return backend


class ParallelAnalysisMixin:
    """Parallel runs for the analyses of this package (mixed in before ``AnalysisBase``).

    Adds the ``'node'`` backend and dask clients to MDAnalysis's backends, accepts this
    package's backend objects without ``unsupported_backend=True``, shows a progress bar
    over frames with them (``verbose=True``), and shares the cores among the workers of
    MDAnalysis's own backends. Classes using it keep their per-worker threads in
    ``self.n_threads`` (explicit) and ``self._worker_threads`` (used by the engine).
    """

    _analysis_algorithm_is_parallelizable = True

    @classmethod
    def get_supported_backends(cls):
        """Parallel backends of :meth:`run`: ``('serial', 'multiprocessing', 'dask',
        'node')``; also :class:`~mdakit_fastrdf.backends.NodeBackend` and
        :class:`~mdakit_fastrdf.backends.DaskDistributedBackend` objects."""
        return ("serial", "multiprocessing", "dask", "node")

    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, n_workers=None,
            n_parts=None, backend=None, *, unsupported_backend=False, progressbar_kwargs=None):
        """Perform the calculation (see :meth:`MDAnalysis.analysis.base.AnalysisBase.run`).

        Parameters
        ----------
        backend : str or BackendBase, optional
            ``'serial'`` (default), ``'multiprocessing'``, ``'dask'`` (on the active
            ``dask.distributed`` client when there is one, see
            :class:`~mdakit_fastrdf.backends.DaskDistributedBackend`), ``'node'`` (every GPU
            and CPU socket, :class:`~mdakit_fastrdf.backends.NodeBackend`) or a backend
            object.
        n_workers : int, optional
            Worker processes. With MDAnalysis's backends the cores are shared among them
            (unless ``n_threads`` was given); with ``'node'`` it caps the planned workers.
        n_parts : int, optional
            Parts the frames are cut into. The node and dask-client backends default to
            many small parts (dynamic load balancing).
        verbose : bool, optional
            Progress bar over frames: in the caller with the node and dask-client backends,
            per frame with ``'serial'`` (MDAnalysis allows no bar with its other backends).

        Other parameters are those of MDAnalysis's ``run``.
        """
        explicit = isinstance(backend, _OwnBackend)
        backend = _resolve_backend("serial" if backend is None else backend, n_workers)
        if isinstance(backend, _OwnBackend):
            if explicit and n_workers is not None and n_workers != backend.n_workers:
                raise ValueError(
                    f"n_workers specified twice: {backend.n_workers} in the backend object and "
                    f"{n_workers} in run(); remove it from run()")
            self._worker_threads = self.n_threads
            if n_parts is None:
                n_frames = len(self._setup_computation_groups(
                    1, start=start, stop=stop, step=step, frames=frames)[0])
                n_parts = backend.parts_for(n_frames)
            verbose = getattr(self, "_verbose", False) if verbose is None else verbose
            backend._progress = (bool(verbose), dict(progressbar_kwargs or {}))
            try:
                return super().run(start=start, stop=stop, step=step, frames=frames,
                                   verbose=False, n_workers=None, n_parts=n_parts,
                                   backend=backend, unsupported_backend=unsupported_backend,
                                   progressbar_kwargs=None)
            finally:
                backend._progress = (False, {})
        if self.n_threads is None and n_workers and n_workers > 1 and not isinstance(
                backend, BackendSerial) and backend != "serial":
            self._worker_threads = max(1, available_cpus() // n_workers)
        else:
            self._worker_threads = self.n_threads
        return super().run(start=start, stop=stop, step=step, frames=frames, verbose=verbose,
                           n_workers=n_workers, n_parts=n_parts, backend=backend,
                           unsupported_backend=unsupported_backend,
                           progressbar_kwargs=progressbar_kwargs)

    def _configure_backend(self, backend, n_workers, unsupported_backend=False):
        if isinstance(backend, _OwnBackend):
            if any(not t.parallelizable for t in self._trajectory.transformations):
                raise ValueError(
                    "Trajectory should not have associated unparallelizable transformations")
            return backend
        return super()._configure_backend(backend, n_workers, unsupported_backend)
