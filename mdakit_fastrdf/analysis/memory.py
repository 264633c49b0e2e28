"""Memory checks made before an analysis allocates its histograms."""

from __future__ import annotations

__all__ = ["available_memory_bytes", "check_histogram_memory"]


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
