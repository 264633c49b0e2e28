"""Planning a node backend run: the workers (:class:`WorkerSpec`, :func:`plan_workers`) and
the checks of the backends' options."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from .topology import NodeTopology

__all__ = ["WorkerSpec", "plan_workers"]


@dataclass(frozen=True)
class WorkerSpec:
    """One worker of a :class:`NodeBackend` run.

    ``kind`` is ``'gpu'``, ``'cpu'`` or ``'reader'``; ``device`` the device it is bound to
    (``'cuda:k'`` or ``'cpu'``); ``cpus`` the logical CPUs it is pinned to; ``n_threads``
    the CPU threads of its kernel; ``start_method`` how its process starts; ``idle``: it
    runs at idle priority (Linux ``SCHED_IDLE``) on CPUs it shares with readers, so that it
    takes only the cycles they leave.
    """

    rank: int
    kind: str
    device: str
    cpus: tuple
    n_threads: int
    start_method: str
    engine_device: str | None = None  # differs from device only for CPU stand-ins of GPUs
    idle: bool = False

    def describe(self) -> str:
        cpus = _fmt_cpus(self.cpus)
        return (f"worker {self.rank} ({self.kind}, {self.device}, {self.n_threads} "
                f"thread{'s' if self.n_threads != 1 else ''}, cpus {cpus}, {self.start_method}"
                + (", idle priority)" if self.idle else ")"))


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
                 gpu_start_method="auto", gpu_standin=False, readers=_AUTO,
                 feedable=True, gpu_threads=_AUTO, workers_per_gpu=1) -> list:
    """Decide the workers of a :class:`NodeBackend` run on ``topology``.

    GPU workers come first, one per GPU in `gpus`, each pinned to one core of its own,
    taken in turn from the CPU groups (sockets / NUMA nodes). The remaining cores of each
    group go to its CPU workers (two per group by default, so that one reads and prepares
    a frame while the other computes; one when the group has a single free core), split
    into contiguous blocks of cores, one thread per physical core. See
    :class:`NodeBackend` for the options. Returns a list of :class:`WorkerSpec`.

    Readers (``kind='reader'``, after the compute workers, one logical CPU each) prepare the
    frames of the compute workers (:mod:`.feed`) when the analysis allows it (`feedable`):
    ``readers='auto'`` gives every CPU left by the GPU workers to readers when GPU workers
    are planned and no CPU worker is asked for (`hybrid` True, `cpu_workers` or `n_workers`
    beyond the GPUs): decoding a frame takes far longer than its histogram on a GPU. It
    plans none on a CPU-only node (CPU workers that read their own
    frames are readers already); an integer asks for that many. A fed GPU worker gets
    `gpu_threads` cores for its host work ('auto': a quarter of the node's cores per GPU, 1
    or 2; 1 without readers: on an H200, 2 cores pack 1M atoms a frame as fast as the
    device histograms them, benchmarks/NOTES.md).
    """
    (readers, gpu_threads, workers_per_gpu, cpu_workers, threads_per_worker, n_workers,
     cpu_method, gpu_start_method) = _checked_options(
        readers, gpu_threads, workers_per_gpu, cpu_workers, threads_per_worker, n_workers,
        hybrid, start_method, gpu_start_method)

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

    if readers != _AUTO and readers > 0 and not feedable:
        raise ValueError(
            f"readers={readers}: this analysis cannot take its frames from readers (its "
            "frames need more than fixed rows and the box, e.g. an UpdatingAtomGroup or "
            "k-space sums); use readers=0 or 'auto'")
    # free physical cores of each group (each a tuple of logical cpus)
    free = [list(g.cores) if g.cores else [(c,) for c in g.cpus] for g in topology.groups]
    wants_cpu_workers = (hybrid is True or cpu_workers != _AUTO
                         or (n_workers is not None and n_workers > len(gpu_ids)))
    # CPU workers beside GPU workers (hybrid=True or cpu_workers=N): readers still read
    # for the GPUs on every free core, and the CPU workers share those cores at idle
    # priority: they take only the cycles the readers leave, so that they never slow the
    # GPUs' feed (a CPU worker that reads its own frames and histograms them is far slower
    # than the GPUs: the scheduler gives it only parts it finishes in time). Measured on
    # 2x H200 with CPU workers on cores taken from the readers: 0.90-0.96x the GPUs alone
    # with XTC, whose reading is the limit (benchmarks/NOTES.md, 2026-11-28)
    hybrid_fed = (readers == _AUTO and feedable and bool(gpu_ids) and wants_cpu_workers
                  and n_workers is None and use_cpu)
    auto_readers = (readers == _AUTO and feedable and bool(gpu_ids)
                    and (not wants_cpu_workers or hybrid_fed))
    fed = auto_readers or (readers != _AUTO and readers > 0)
    if gpu_threads == _AUTO:
        # A fed GPU worker's host work (packing a frame for the device) is all it does: two
        # cores keep an H200 busy with 1M atoms (bench_gpu_host.py: 156 frames/s with 2
        # CPUs, the same with 4-16; 138 with 1); the rest read
        n_cores = sum(len(f) for f in free)
        gpu_threads = max(1, min(2, n_cores // (4 * max(1, len(gpu_ids)) * workers_per_gpu))
                          ) if fed else 1
    specs = _gpu_workers(topology, free, gpu_ids, workers_per_gpu, gpu_threads,
                         gpu_start_method, gpu_standin)

    # readers: logical CPUs of the free cores, taken in turn from the groups
    if readers == _AUTO:
        n_readers = sum(len(core) for f in free for core in f) if auto_readers else 0
        if n_readers and hybrid == _AUTO and not hybrid_fed:
            use_cpu = False  # the free CPUs read for the GPUs
    else:
        n_readers = readers
    shared = [list(f) for f in free]  # (the cores a hybrid plan's CPU workers share)
    reader_cpus, free = _reader_cpus(topology, free, specs, n_readers)
    if hybrid_fed:
        specs += _cpu_workers(shared, len(specs), cpu_workers, None, threads_per_worker,
                              cpu_method, idle=True)
    elif use_cpu:
        specs += _cpu_workers(free, len(specs), cpu_workers, n_workers, threads_per_worker,
                              cpu_method)
    for c in reader_cpus:
        specs_r = WorkerSpec(len(specs), "reader", "cpu", (c,), 1, cpu_method, engine_device="cpu")
        specs.append(specs_r)
    if not any(s.kind != "reader" for s in specs):
        raise ValueError(
            "no workers could be planned: no GPU and no free core "
            f"(topology: {len(topology.groups)} group(s), {topology.n_cpus} cpu(s), "
            f"{topology.n_gpus} GPU(s))")
    return specs


def _checked_options(readers, gpu_threads, workers_per_gpu, cpu_workers, threads_per_worker,
                     n_workers, hybrid, start_method, gpu_start_method):
    """:func:`plan_workers`' counts and start methods, checked (a clear error for each
    bad value) and resolved: ``(readers, gpu_threads, workers_per_gpu, cpu_workers,
    threads_per_worker, n_workers, CPU processes' start method, GPU workers')``."""
    readers = _check_auto_int("readers", readers, 0, "it is the number of reader processes")
    gpu_threads = _check_auto_int("gpu_threads", gpu_threads, 1,
                                  "it is the number of cores of each GPU worker")
    workers_per_gpu = _check_auto_int("workers_per_gpu", workers_per_gpu, 1,
                                      "it is the number of worker processes per GPU")
    if workers_per_gpu == _AUTO:
        workers_per_gpu = 1
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
    if gpu_start_method not in ("auto", "spawn", "forkserver"):
        raise ValueError(
            f"gpu_start_method must be 'auto', 'spawn' or 'forkserver', got "
            f"{gpu_start_method!r}: "
            "CUDA cannot be used in a process forked from one that may have used it")
    cpu_method, gpu_start_method = _start_methods(start_method, gpu_start_method)
    return (readers, gpu_threads, workers_per_gpu, cpu_workers, threads_per_worker, n_workers,
            cpu_method, gpu_start_method)


def _start_methods(start_method, gpu_start_method):
    """``(CPU workers' and readers' start method, GPU workers')``: fork (milliseconds, no
    imports, no main guard) where the system has it, unless asked otherwise; for GPU
    workers ('auto') fork only while nothing in this process has used CUDA, which a forked
    child could not use, else spawn (~1 s: a new interpreter)."""
    import multiprocessing as mp

    cpu_method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    if gpu_start_method == "auto":
        from ..engine import cuda

        gpu_start_method = ("fork" if "fork" in mp.get_all_start_methods()
                            and not cuda.cuda_used_in_this_process() else "spawn")
    return cpu_method, gpu_start_method


def _gpu_workers(topology, free, gpu_ids, workers_per_gpu, gpu_threads, start_method,
                 standin):
    """The GPU workers' specs, each on `gpu_threads` cores taken (from `free`, which
    loses them) from the group with the most free cores, in turn from the GPU's index."""
    specs = []
    for k, gid in [(k, gid) for k, gid in enumerate(gpu_ids) for _ in range(workers_per_gpu)]:
        order = sorted(range(len(free)), key=lambda g: (-len(free[g]), (g - k) % len(free)))
        g = order[0]
        if free[g]:
            cores = [free[g].pop() for _ in range(min(gpu_threads, len(free[g])))]
            cpus = tuple(sorted(c for core in cores for c in core))
        else:  # more GPUs than cores: share the group
            cores = [()]
            cpus = tuple(c for c in topology.groups[k % len(free)].cpus)
        specs.append(WorkerSpec(
            len(specs), "gpu", f"cuda:{gid}", cpus, len(cores), start_method,
            engine_device="cpu" if standin else f"cuda:{gid}"))
    return specs


def _reader_cpus(topology, free, specs, n_readers):
    """``(one logical CPU per reader, the free cores left)``: the free cores' CPUs taken in
    turn from the groups; readers share CPUs when there are more readers than free CPUs
    (the GPU workers' when every core went to them)."""
    reader_cpus = []
    if not n_readers:
        return reader_cpus, free
    order = [list(f) for f in free]
    while len(reader_cpus) < n_readers and any(order):
        for g, cores in enumerate(order):
            if cores and len(reader_cpus) < n_readers:
                core = cores.pop(0)
                free[g].remove(core)
                reader_cpus.extend(core[: n_readers - len(reader_cpus)])
    if not reader_cpus:  # every core went to GPU workers: readers share them
        reader_cpus = [c for s in specs for c in s.cpus][:1]
    k = 0
    while len(reader_cpus) < n_readers:  # more readers than free CPUs: they share them
        reader_cpus.append(reader_cpus[k])
        k += 1
    if not specs and not any(free):
        # a CPU-only node whose cores all read: the CPU worker shares them (its kernel
        # waits for frames most of the time, which is why one asks for so many readers)
        cores = [core for g in topology.groups
                 for core in (g.cores or [(c,) for c in g.cpus])]
        free = [cores]
    return reader_cpus, free


def _cpu_workers(free, n_gpu, cpu_workers, n_workers, threads_per_worker, start_method,
                 idle=False):
    """The CPU workers' specs (ranks from `n_gpu` on): two per group ('auto'), or
    `cpu_workers` (or what `n_workers` leaves) spread over the groups, each on a contiguous
    block of that group's free cores (`idle`: cores the readers read on, shared at idle
    priority)."""
    n_free = [len(f) for f in free]
    total_free = sum(n_free)
    if cpu_workers == _AUTO:
        per_group = [min(2, n) for n in n_free]
        if n_workers is not None:
            per_group = _spread(n_workers - n_gpu, n_free)
    else:
        if n_workers is not None and n_workers != n_gpu + cpu_workers:
            raise ValueError(
                f"n_workers={n_workers} but {n_gpu} GPU worker(s) + cpu_workers="
                f"{cpu_workers}; give one of them, or make them agree")
        if cpu_workers > total_free:
            raise ValueError(
                f"cpu_workers={cpu_workers}, but only {total_free} core(s) are free for "
                f"CPU workers ({n_gpu} reserved for GPU workers); use at most "
                f"{total_free} or 'auto'")
        per_group = _spread(cpu_workers, n_free)
    specs = []
    for g, n in enumerate(per_group):
        if n <= 0:
            continue
        cores = free[g]
        for j in range(n):
            lo, hi = (j * len(cores)) // n, ((j + 1) * len(cores)) // n
            block = cores[lo:hi]
            cpus = tuple(c for core in block for c in core)
            threads = len(block) if threads_per_worker == _AUTO else threads_per_worker
            specs.append(WorkerSpec(n_gpu + len(specs), "cpu", "cpu", cpus, max(1, threads),
                                    start_method, engine_device="cpu", idle=idle))
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
