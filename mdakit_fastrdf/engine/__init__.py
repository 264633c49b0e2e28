"""The engine: picks a device and kernel, owns persistent buffers, histograms one frame.

The analysis classes hand the engine one contiguous float32 block with the positions of all
species, the species offsets, the list of species pairs and the box; one call per frame fills
the uint64 counts of every pair. Compiled state is created lazily, in the process that runs the
frames (analysis objects are pickled to parallel workers), and never pickled.
"""

from __future__ import annotations

import os
import threading

import numpy as np

__all__ = [
    "MAX_BINS", "Box", "Engine", "build_info", "cuda_devices", "prepare_box", "validate_device",
    "validate_precision",
]

try:
    from . import _fastrdf_cpu as _cpu
except ImportError as exc:
    _why = "was not found" if isinstance(exc, ModuleNotFoundError) else f"could not be loaded ({exc})"
    raise ImportError(
        f"mdakit_fastrdf: the compiled kernel module mdakit_fastrdf.engine._fastrdf_cpu {_why}. "
        "The usual cause is running from a source checkout that was not built: install the "
        "package, which compiles the kernels, with `python -m pip install .` from the "
        "checkout (add `-e` for an editable install)."
    ) from exc

# The constants of the kernels, as the compiled module exports them (kernel_api.hpp,
# geometry.hpp): the box kinds, the most bins any device takes (the GPU's float bin index
# needs nbins < 2^22, and every device accepts the same problems), the pair-finding methods,
# the orders of the cell columns and the largest cells per cutoff.
NO_BOX, ORTHO, TRICLINIC, ORTHO_SCALED = _cpu.NO_BOX, _cpu.ORTHO, _cpu.TRICLINIC, _cpu.ORTHO_SCALED
ORTHO_SLAB, TRICLINIC_SLAB = _cpu.ORTHO_SLAB, _cpu.TRICLINIC_SLAB
MAX_BINS = _cpu.MAX_BINS
_DEVICES = ("auto", "cpu", "cuda")

from .box import Box, prepare_box  # noqa: E402 - after the compiled module's check
from .options import (  # noqa: E402, F401
    validate_cell_order,
    validate_cells_per_cutoff,
    validate_kernel,
    validate_method,
    validate_n_threads,
    validate_precision,
)
from .placement import (  # noqa: E402, F401 - the engine's names, as before
    WorkerPlacement,
    impl_cache,
    placed_device,
    set_worker_placement,
    worker_placement,
)


# device='auto' takes the GPU from this many atom pairs per frame on (below it the launch and
# transfer overheads outweigh the kernel; see docs/performance.rst for the measurement).
AUTO_GPU_MIN_PAIRS = 1_000_000

# Cell side rmax / k of the cell lists on each device (measured, benchmarks/NOTES.md); 0 on
# the CPU: the k of 1, 2, 3 that the cost model finds cheapest for the frame.
CPU_CELLS_PER_CUTOFF = 0
GPU_CELLS_PER_CUTOFF = 1


def _cpu_module():
    return _cpu


from . import cuda  # noqa: E402 - the CUDA probe and start, and their state
from .cuda import (  # noqa: E402, F401 - the engine's names, as before
    _cuda_init,
    _cuda_module,
    cuda_devices,
    cuda_start_span,
    cuda_unavailable_reason,
    cuda_used_in_this_process,
    start_cuda_early,
    validate_device,
    visible_nvidia_gpu,
)


def build_info() -> dict:
    """Describe what was compiled and what this machine can run.

    Does not initialise CUDA (see :func:`cuda_devices` for the GPUs themselves).

    Returns
    -------
    dict
        ``version``, ``compiler``, ``threads`` (how the CPU kernel runs threads), ``max_threads``, ``cpu_isa`` (compiled SIMD
        variants), ``cpu_isa_usable`` (those this CPU runs), ``cpu_isa_selected`` (the one used),
        ``l2_cache_bytes`` (drives the cache blocking), ``cuda`` (whether CUDA kernels were
        built) and, when they were, ``cuda_architectures`` (the GPU architectures compiled;
        ``-real`` machine code, ``-virtual`` PTX for newer GPUs) and ``cuda_fast_rule``
        (whether the experimental approximate-root kernels, ``exact_sqrt=False``, were built:
        CMake option ``FASTRDF_CUDA_FAST_RULE``, off by default).
    """
    m = _cpu_module()
    info = {
        "version": m.version,
        "compiler": m.compiler,
        "threads": m.threads,
        "max_threads": int(m.max_threads()),
        "cpu_isa": list(m.compiled_variants()),
        "cpu_isa_usable": list(m.usable_variants()),
        "cpu_isa_selected": m.default_variant(),
        "l2_cache_bytes": int(m.l2_cache_bytes()),
        "cuda": cuda._cuda_module() is not None,
    }
    if info["cuda"]:
        info["cuda_architectures"] = cuda._cuda_module().architectures.split(",")
        info["cuda_fast_rule"] = cuda._cuda_fast_rule()
    return info


def _pairs_per_frame(offsets, pairs) -> int:
    sizes = np.diff(offsets)
    total = 0
    for a, b in pairs:
        total += int(sizes[a]) * (int(sizes[a]) - 1) // 2 if a == b else int(sizes[a]) * int(sizes[b])
    return total



def resolve_device(asked, placement, gpu_pays=None) -> str:
    """The device (``'cpu'`` or ``'cuda:N'``) of an engine asked for `asked` (a checked
    ``device``) under a worker's `placement`. ``'auto'`` takes the GPU when this build has
    CUDA kernels (else, once, a hint on how to get them), `gpu_pays()` says the work is
    large enough, and a GPU can be used; an explicit GPU that cannot be used is a
    RuntimeError saying why."""
    device = placed_device(asked, placement)
    if device == "cpu":
        return "cpu"
    if device.startswith("auto"):
        if cuda._cuda_module() is None:
            cuda._hint_cuda_build()
            return "cpu"
        if gpu_pays is not None and not gpu_pays():
            return "cpu"
        index = device[5:] or "0"
        return f"cuda:{index}" if cuda.cuda_unavailable_reason() is None else "cpu"
    why = cuda.cuda_unavailable_reason()
    if why is not None:
        raise RuntimeError(
            f"device={asked!r} was asked for, but {why}. Otherwise use device='cpu' or "
            "device='auto'.")
    return device

class Engine:
    """Histograms the species pairs of one frame per call on the chosen device.

    Parameters
    ----------
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}
        Where to run. ``'auto'`` uses GPU 0 when this build has CUDA kernels, a GPU is usable
        in this process and a frame holds at least :data:`AUTO_GPU_MIN_PAIRS` atom pairs;
        otherwise the CPU. ``'cuda'`` without a usable GPU raises a RuntimeError.
    precision : {'single', 'double'}
        Arithmetic of the distances.
    n_threads : int or None
        CPU threads (``None``: all cores the process may use).
    kernel : {'auto', 'shared', 'packed', 'global'}
        CUDA all-pairs kernel: shared-memory histograms of 32-bit counters (in several sweeps
        when the histogram is wider than shared memory), ``'packed'`` shared-memory
        histograms of two 16-bit counters per word (twice as many bins per sweep; a counter
        is emptied into the 64-bit totals whenever it reaches 32768), or 64-bit atomics in
        device memory; ``'auto'`` chooses from the device's shared memory: ``'shared'`` while
        one window of 32-bit histograms holds every bin (up to ~54k bins on Hopper), else
        ``'packed'`` in up to 4 sweeps (~430k bins), else ``'global'``. The block size of
        ``'shared'`` (256 or 1024 threads) follows the histogram's width and the frame's
        pair count; the environment variable ``FASTRDF_CUDA_BLOCK_THREADS`` (``'256'`` or
        ``'1024'``) forces it, to measure the choice.
        The cell-list kernels take ``'shared'`` or ``'global'`` (``'packed'`` counts as
        ``'shared'`` there). Every kernel gives the same histogram.
    max_window_bins : int
        Caps the bins of one shared-memory sweep (0: as many as fit); for tests.
    method : {'auto', 'allpairs', 'cells'}
        How the pairs are found: every pair of the two species, or only those of
        neighbouring cells of a cell list (O(N) at fixed ``rmax`` and density; the same
        counts). ``'auto'`` estimates the work of both from the frame and takes the cheaper.
    cells_per_cutoff : int or None
        Cell side ``rmax / cells_per_cutoff`` of the cell lists (1 to 8). None: on the CPU
        the cheapest of 1, 2 and 3 for each frame by the cost model, on a GPU
        :data:`GPU_CELLS_PER_CUTOFF` (measured).
    cell_order : {'rowmajor', 'morton', 'hilbert'}
        Order of the cell columns in memory (for measurements; see benchmarks/NOTES.md).
    exact_sqrt : bool
        Single precision on the GPU with the IEEE square root for every pair (default), or
        (``False``) the hardware's approximate root with an exact correction of the pairs
        near a bin edge. Both give the same histogram; the approximate root was slower on an
        H200 (benchmarks/NOTES.md), so it is kept for experiments only: its kernels exist
        in builds with ``-C cmake.define.FASTRDF_CUDA_FAST_RULE=ON`` alone, and elsewhere
        ``exact_sqrt=False`` raises ``ValueError``.

    Notes
    -----
    On a GPU the counts stay on the device until :meth:`synchronize`, which adds them into
    the last ``out`` array; the CPU adds them at once.
    """

    def __init__(self, device="auto", precision="single", n_threads=None, *, kernel="auto",
                 max_window_bins=0, exact_sqrt=True, method="auto", cells_per_cutoff=None,
                 cell_order="rowmajor"):
        self.device = validate_device(device)
        self.method = validate_method(method)
        self.cells_per_cutoff = validate_cells_per_cutoff(cells_per_cutoff)
        self.cell_order = validate_cell_order(cell_order)
        self.precision = validate_precision(precision)
        self.n_threads = validate_n_threads(n_threads)
        self.kernel = validate_kernel(kernel)
        self.max_window_bins = int(max_window_bins)
        self.exact_sqrt = bool(exact_sqrt)
        if not self.exact_sqrt and cuda._cuda_module() is not None and not cuda._cuda_fast_rule():
            raise ValueError(
                "exact_sqrt=False: this build has no approximate-root kernels (an experiment, "
                "measured slower than the default); rebuild with "
                "-C cmake.define.FASTRDF_CUDA_FAST_RULE=ON, or keep exact_sqrt=True")
        self.device_used = None  # 'cpu' or 'cuda:N' once the first frame ran
        self._impl = None
        self._last_out = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_impl"] = None  # compiled state is per process
        state["device_used"] = None
        state["_last_out"] = None
        return state

    def _same_out(self, out):
        """`out`, or the array the previous frame's counts went into when `out` is another
        view of the same memory (the same address, shape, strides and type).

        A GPU engine keeps the counts of the frames it queued on the device and adds them
        into one output object; handed another object, it first waits for the device and
        adds them (:meth:`synchronize`). An analysis that passes a new view of the same
        counts each frame (a reshape) would otherwise make the host wait for every frame
        instead of packing the next one while the device computes (measured on an H200:
        8.8 against 6.0 ms a frame of 1M atoms; benchmarks/NOTES.md). Holding the previous
        array keeps its memory alive, so an equal address is the same memory."""
        last = self._last_out
        if (last is not None and out is not last and isinstance(out, np.ndarray)
                and last.shape == out.shape and last.strides == out.strides
                and last.dtype == out.dtype
                and last.__array_interface__["data"][0] == out.__array_interface__["data"][0]):
            return last
        self._last_out = out
        return out

    def _resolve(self, offsets, pairs) -> str:
        return resolve_device(self.device, worker_placement(),
                              lambda: _pairs_per_frame(offsets, pairs) >= AUTO_GPU_MIN_PAIRS)

    def _make_impl(self, offsets, pairs):
        self.device_used = self._resolve(offsets, pairs)
        placement = worker_placement()
        n_threads = self.n_threads or (placement.n_threads if placement is not None else None)
        key = (threading.get_ident(), self.device_used, n_threads or 0, self.kernel,
               self.max_window_bins, self.exact_sqrt, self.method, self.cells_per_cutoff,
               self.cell_order)
        if placement is not None and key in impl_cache:
            # a backend worker: reuse the compiled state of its previous parts (the previous
            # analysis synchronised it at the end of its frames)
            return impl_cache[key]
        if self.device_used == "cpu":
            k = CPU_CELLS_PER_CUTOFF if self.cells_per_cutoff is None else self.cells_per_cutoff
            impl = _cpu_module().CpuHistogrammer(n_threads or 0, "", self.method, k,
                                                 self.cell_order)
        else:
            index = int(self.device_used.split(":")[1])
            m = cuda._cuda_init()
            n = m.device_count()
            if index >= n:
                raise ValueError(
                    f"device={self.device!r}: there is no CUDA device {index} (found {n})")
            impl = m.CudaHistogrammer(index, self.kernel, self.max_window_bins, self.exact_sqrt,
                                      self.method, self.cells_per_cutoff or GPU_CELLS_PER_CUTOFF,
                                      self.cell_order)
        if placement is not None:
            impl_cache[key] = impl
        return impl

    def accumulate(self, coords, offsets, pairs, edges, box: Box, labels, out):
        """Add the histograms of all ``pairs`` of this frame to ``out`` (uint64).

        The CPU adds them at once; a GPU at the next :meth:`synchronize` (or when ``out``
        changes).
        """
        if self._impl is None:
            self._impl = self._make_impl(offsets, pairs)
        out = self._same_out(out)
        self._impl.accumulate(
            coords, offsets, pairs, edges, box.kind, box.kernel_array, labels, out,
            self.precision == "double",
        )

    def accumulate_sites(self, coords1, coords2, rng, nbins, box: Box, out):
        """Add one histogram per atom pair ``(i, j)`` of `coords1` x `coords2` to `out`
        (float64, ``(n1, n2, nbins)``), with MDAnalysis's ``InterRDF_s`` binning (bin
        ``floor((r - rmin) nbins / (rmax - rmin))``, counted when in ``[0, nbins)``).

        Site histograms run on the CPU only: their cost is writing ``n1 n2 nbins`` counters,
        which the GPU would have to copy back every frame. A device other than the CPU is a
        ValueError (``'auto'`` runs here on the CPU).
        """
        if self.device.startswith("cuda"):
            raise ValueError(
                f"device={self.device!r}: site-site histograms (InterRDF_s) have no GPU "
                "kernel; use device='cpu' or device='auto' (which runs them on the CPU)")
        if self.device_used is None:
            self.device_used = "cpu"
        placement = worker_placement()
        n_threads = self.n_threads or (placement.n_threads if placement is not None else None)
        rmin, rmax = rng
        _cpu_module().site_histograms(
            coords1, coords2, rmin, rmax, nbins, box.kind,
            None if box.kind == NO_BOX else box.vectors, out, self.precision == "double",
            n_threads or 0)

    def synchronize(self):
        """Wait for the queued frames and add their counts into ``out``."""
        if self._impl is not None and hasattr(self._impl, "synchronize"):
            self._impl.synchronize()

    @property
    def last_method(self):
        """How the last frame found its pairs: 'allpairs' or 'cells' (None before the first)."""
        return getattr(self._impl, "last_method", None)

    @property
    def last_launch(self):
        """How the last frame ran on the GPU (kernel, sweeps, window, copies, tasks, rule), or
        None."""
        return getattr(self._impl, "last_launch", None)


def gather_positions(positions: np.ndarray, ix: np.ndarray, out: np.ndarray) -> bool:
    """Copy rows ``ix`` (int64) of the float32 ``(n, 3)`` `positions` into `out` in one
    compiled pass; False when a value is NaN or infinite."""
    return _cpu.gather_positions(positions, ix, out)


def wrap_positions(coords: np.ndarray, box: Box) -> None:
    """Wrap float32 ``coords`` (in place) into the primary cell as MDAnalysis does."""
    if box.kind == NO_BOX:
        return
    _cpu_module().wrap_positions(coords, box.vectors32, box.kind == TRICLINIC)


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
