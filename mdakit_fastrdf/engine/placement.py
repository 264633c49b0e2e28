"""Where a backend's worker process runs: its device and CPU threads."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WorkerPlacement", "impl_cache", "placed_device", "set_worker_placement",
           "worker_placement"]

# -- worker placement -------------------------------------------------------------------
# A parallel backend (mdakit_fastrdf.backends) binds each of its worker processes to a device
# and a number of CPU threads by calling set_worker_placement() in the worker. Engines made in
# that process then map the analysis's device to the worker's: in a GPU worker bound to
# 'cuda:k', device='auto' and 'cuda[:N]' run on GPU k; in a CPU worker 'auto' runs on the CPU.
# n_threads=None takes the worker's thread count. Compiled implementations are kept for the
# life of the worker, so a GPU worker keeps its buffers and streams across the parts it runs.


@dataclass(frozen=True)
class WorkerPlacement:
    """Where a backend worker process runs (see :func:`set_worker_placement`)."""

    device: str | None = "cpu"  # 'cpu' or 'cuda:k': what the Engine uses; None: no mapping
    n_threads: int | None = None
    rank: int = 0
    kind: str = "cpu"  # 'cpu' or 'gpu'
    bound_device: str | None = None  # the device the backend assigned (for reports, tests)


_placement: WorkerPlacement | None = None
impl_cache: dict = {}


def set_worker_placement(placement: WorkerPlacement | None) -> None:
    """Bind this process (a backend worker) to a device and thread count; None unbinds."""
    global _placement
    _placement = placement
    impl_cache.clear()


def worker_placement() -> WorkerPlacement | None:
    """The placement of this worker process, or None outside a backend worker."""
    return _placement


def placed_device(requested: str, placement: WorkerPlacement | None) -> str:
    """The device an Engine asked for ``requested`` uses under ``placement``.

    Outside a worker (``None``, or a placement without a device) nothing changes. A CPU worker runs ``'auto'`` on the CPU;
    a GPU worker bound to ``'cuda:k'`` turns ``'auto'`` into ``'auto:k'`` (GPU k when the
    frame is large enough, else the CPU) and any ``'cuda:N'`` into ``'cuda:k'``.
    ``'cpu'`` stays ``'cpu'``.
    """
    if placement is None or placement.device is None or requested == "cpu":
        return requested
    if placement.device == "cpu":
        return "cpu" if requested == "auto" else requested
    index = placement.device.split(":")[1]
    return f"auto:{index}" if requested == "auto" else f"cuda:{index}"
