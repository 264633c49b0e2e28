"""The engine: picks a device and kernel, owns persistent buffers, histograms one frame.

The analysis classes hand the engine one contiguous float32 block with the positions of all
species, the species offsets, the list of species pairs and the box; one call per frame fills
the uint64 counts of every pair. Compiled state is created lazily, in the process that runs the
frames (analysis objects are pickled to parallel workers), and never pickled.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass

import numpy as np
from MDAnalysis.lib.mdamath import triclinic_vectors

__all__ = ["Engine", "Box", "prepare_box", "build_info", "validate_device", "validate_precision"]

NO_BOX, ORTHO, TRICLINIC, ORTHO_SCALED = 0, 1, 2, 3
_DEVICES = ("auto", "cpu", "cuda")
_PRECISIONS = ("single", "double")


def _cpu_module():
    from . import _fastrdf_cpu

    return _fastrdf_cpu


def build_info() -> dict:
    """Describe what was compiled and what this machine can run.

    Returns
    -------
    dict
        ``version``, ``compiler``, ``openmp`` (bool), ``max_threads``, ``cpu_isa`` (compiled SIMD
        variants), ``cpu_isa_usable`` (those this CPU runs), ``cpu_isa_selected`` (the one used),
        ``l2_cache_bytes`` (drives the cache blocking) and ``cuda`` (whether CUDA kernels were
        built; always ``False`` in this release).
    """
    m = _cpu_module()
    return {
        "version": m.version,
        "compiler": m.compiler,
        "openmp": bool(m.openmp),
        "max_threads": int(m.max_threads()),
        "cpu_isa": list(m.compiled_variants()),
        "cpu_isa_usable": list(m.usable_variants()),
        "cpu_isa_selected": m.default_variant(),
        "l2_cache_bytes": int(m.l2_cache_bytes()),
        "cuda": False,
    }


def validate_device(device) -> str:
    if not isinstance(device, str):
        raise TypeError(f"device must be a string ('auto', 'cpu' or 'cuda'), got {device!r}")
    d = device.lower()
    if d == "cuda" or d.startswith("cuda:"):
        raise ValueError(
            f"device={device!r}: this build of mdakit_fastrdf has no CUDA kernels "
            "(build_info()['cuda'] is False); use device='cpu' or device='auto'"
        )
    if d not in ("auto", "cpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
    return d


def validate_precision(precision) -> str:
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be 'single' or 'double', got {precision!r}")
    return precision


def validate_n_threads(n_threads):
    if n_threads is None:
        return None
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral):
        raise TypeError(f"n_threads must be a positive integer or None, got {n_threads!r}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1 (or None for all cores), got {n_threads}")
    return int(n_threads)


@dataclass(frozen=True)
class Box:
    """A periodic box prepared for the kernels.

    ``kind`` is 0 (none), 1 (orthorhombic), 2 (triclinic) or 3 (orthorhombic with the
    arithmetic of MDAnalysis's brute-force search, see ``geometry.hpp``); ``vectors32`` are
    MDAnalysis's float32 box vectors (rows) and ``vectors`` the same values in float64.
    """

    kind: int
    vectors32: np.ndarray | None = None

    @property
    def vectors(self):
        return None if self.vectors32 is None else self.vectors32.astype(np.float64)


def prepare_box(dimensions) -> Box:
    """Validate ``ts.dimensions`` and turn it into a :class:`Box`.

    ``None`` (or all zeros, MDAnalysis's "no box") gives no periodic boundaries. Lengths must be
    positive and finite, angles in (0, 180) degrees and together describe a cell of positive
    volume; otherwise a ValueError names the box.
    """
    if dimensions is None:
        return Box(NO_BOX)
    dims = np.asarray(dimensions, dtype=np.float64)
    if dims.shape != (6,):
        raise ValueError(f"box: dimensions must be [lx, ly, lz, alpha, beta, gamma], got {dimensions!r}")
    if not np.all(np.isfinite(dims)):
        raise ValueError(f"box: dimensions must be finite, got {dimensions!r}")
    if np.all(dims[:3] == 0):
        return Box(NO_BOX)
    if np.any(dims[:3] <= 0):
        raise ValueError(f"box: lengths must be positive, got {dims[:3]!r}")
    if np.any(dims[3:] <= 0) or np.any(dims[3:] >= 180):
        raise ValueError(f"box: angles must lie strictly between 0 and 180 degrees, got {dims[3:]!r}")
    vectors = triclinic_vectors(np.asarray(dimensions, dtype=np.float32))
    if not np.any(vectors):
        raise ValueError(f"box: the angles {dims[3:]!r} do not describe a valid triclinic cell")
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    kind = ORTHO if np.all(dims[3:] == 90.0) else TRICLINIC
    return Box(kind, vectors)


class Engine:
    """Histograms the species pairs of one frame per call on the chosen device.

    Parameters
    ----------
    device : {'auto', 'cpu'}
        Where to run. ``'auto'`` picks the CPU in this release.
    precision : {'single', 'double'}
        Arithmetic of the distances.
    n_threads : int or None
        CPU threads (``None``: all cores the process may use).
    """

    def __init__(self, device="auto", precision="single", n_threads=None):
        self.device = validate_device(device)
        self.precision = validate_precision(precision)
        self.n_threads = validate_n_threads(n_threads)
        self._impl = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_impl"] = None  # compiled state is per process
        return state

    @property
    def impl(self):
        if self._impl is None:
            self._impl = _cpu_module().CpuHistogrammer(self.n_threads or 0)
        return self._impl

    def accumulate(self, coords, offsets, pairs, edges, box: Box, labels, out):
        """Add the histograms of all ``pairs`` of this frame to ``out`` (uint64, in place)."""
        self.impl.accumulate(
            coords, offsets, pairs, edges, box.kind, box.vectors, labels, out,
            self.precision == "double",
        )


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
