"""Memory checks made before an analysis allocates its histograms."""

from __future__ import annotations

__all__ = ["available_memory_bytes", "check_histogram_memory", "run_layout"]


def available_memory_bytes():
    """Memory the system can give this process now (``MemAvailable`` of /proc/meminfo), or
    None where that is not known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return None


def check_histogram_memory(n_pairs, nbins, result_arrays, threads):
    """MemoryError, before anything is allocated, when a worker's histograms do not fit in
    the available memory: the uint64 counts and `result_arrays` float64 arrays of
    ``n_pairs x nbins``, and on the CPU (`threads` > 0) the kernel's per-thread uint32
    histograms (``threads x n_pairs x (nbins + 16)``). Under 1 MiB in all the system's
    memory is not read (~25 µs a run)."""
    results = (1 + result_arrays) * 8 * n_pairs * nbins
    workspace = 4 * threads * n_pairs * (nbins + 16)
    need = results + workspace
    if need < 2**20:
        return
    avail = available_memory_bytes()
    if avail is not None and need > avail:
        detail = f"{results / 2**30:.2f} GiB of counts and results"
        if workspace:
            detail += (f" and {workspace / 2**30:.2f} GiB of per-thread CPU histograms "
                       f"({threads} threads)")
        raise MemoryError(
            f"nbins={nbins} with {n_pairs} pair histogram(s) needs {need / 2**30:.2f} GiB "
            f"({detail}) but only {avail / 2**30:.2f} GiB are available; use fewer bins "
            f"(nbins), fewer species or fewer threads (n_threads)"
        )


def run_layout(analysis, backend, n_workers, n_parts, start, stop, step, frames):
    """``(parallel, workers, parts)`` of `analysis`'s run with these arguments, as the
    backend will run it: whether the histograms are made in worker processes, how many
    workers hold a set at once, and how many parts the caller receives."""
    from MDAnalysis.analysis.backends import BackendBase, BackendSerial

    from ..backends import NodeBackend, _OwnBackend, _resolve_backend

    n_frames = max(1, len(analysis._setup_computation_groups(
        1, start=start, stop=stop, step=step, frames=frames)[0]))
    if (backend is None or isinstance(backend, BackendSerial)
            or (isinstance(backend, str) and backend.lower() == "serial")):
        return False, 1, max(1, min(int(n_parts or 1), n_frames))
    resolved = _resolve_backend(backend, n_workers)
    if isinstance(resolved, _OwnBackend):  # 'node', dask clients, their objects
        parts = n_parts if n_parts is not None else resolved.parts_for(n_frames)
        workers = resolved.n_workers
        if isinstance(resolved, NodeBackend):
            try:  # the workers it starts for this analysis (CPU only)
                workers = len([s for s in resolved.plan(analysis._plan_device())
                               if s.kind != "reader"])
            except ValueError:  # the run raises it
                pass
    elif isinstance(resolved, BackendBase):  # MDAnalysis's backend objects
        workers = getattr(resolved, "n_workers", None) or 1
        parts = n_parts if n_parts is not None else (n_workers or workers)
    else:  # MDAnalysis's backends by name: 'multiprocessing', 'dask'
        workers = n_workers or 1
        parts = n_parts if n_parts is not None else workers
    parts = max(1, min(int(parts), n_frames))
    return True, max(1, min(int(workers), parts)), parts
