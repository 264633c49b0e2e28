"""A periodic box prepared for the kernels (:class:`Box`, :func:`prepare_box`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from MDAnalysis.lib.mdamath import triclinic_vectors

from ._fastrdf_cpu import NO_BOX, ORTHO, ORTHO_SLAB, TRICLINIC, TRICLINIC_SLAB

__all__ = ["Box", "prepare_box"]


@dataclass(frozen=True)
class Box:
    """A periodic box prepared for the kernels.

    ``kind`` is 0 (none), 1 (orthorhombic), 2 (triclinic), 3 (orthorhombic with the
    arithmetic of MDAnalysis's brute-force search, see ``geometry.hpp``), 4 or 5
    (orthorhombic or triclinic with a slab condition, ``OrthoSlabBox`` and
    ``TriclinicBox<T, true, true>``: a pair counts at its nearest image whose z component
    lies in ``[-h, h]``, at its in-plane distance for ``w = 0`` or its 3D distance for
    ``w = 1``; ``slab = (h, w)``); ``vectors32`` are MDAnalysis's float32 box vectors (rows)
    and ``vectors`` the same values in float64.
    """

    kind: int
    vectors32: np.ndarray | None = None
    slab: tuple | None = None
    #: MDAnalysis's ``ts.volume`` of the box (``box_volume``), from :func:`prepare_box`
    volume: float | None = None

    @property
    def vectors(self):
        return None if self.vectors32 is None else self.vectors32.astype(np.float64)

    @property
    def kernel_array(self):
        """The box as the kernels take it: the float64 vectors, and for the slab box a
        fourth row ``(h, w, 0)``."""
        if self.kind not in (ORTHO_SLAB, TRICLINIC_SLAB):
            return self.vectors
        out = np.zeros((4, 3))
        out[:3] = self.vectors32
        out[3, :2] = self.slab
        return out


def prepare_box(dimensions) -> Box:
    """Validate ``ts.dimensions`` and turn it into a :class:`Box`.

    ``None`` (or all zeros, MDAnalysis's "no box") gives no periodic boundaries. Lengths must be
    positive and finite, angles in (0, 180) degrees and together describe a cell of positive
    volume; otherwise a ValueError names the box. The box vectors are MDAnalysis's
    ``triclinic_vectors`` of the float32 dimensions, read-only, and ``volume`` is MDAnalysis's
    ``ts.volume`` (``box_volume``), both from one ``triclinic_vectors`` call in float64 (it
    computes in float64 and rounds to the dtype asked for; ``box_volume`` multiplies the
    three lengths of an orthorhombic box and the diagonal of the float64 vectors of another,
    checked bit for bit in ``tests/analysis/test_hostile.py``). The box of the last call is kept, so a
    trajectory whose box does not change prepares it once.
    """
    global _last_box
    if dimensions is None:
        return Box(NO_BOX)
    dims32 = np.asarray(dimensions, dtype=np.float32)
    key = dims32.tobytes()
    last = _last_box
    if last is not None and last[0] == key:
        return last[1]
    values = dims32.tolist()  # the float32 values as exact Python floats: fast checks
    if not isinstance(values, list) or len(values) != 6 or isinstance(values[0], list):
        raise ValueError(f"box: dimensions must be [lx, ly, lz, alpha, beta, gamma], got {dimensions!r}")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"box: dimensions must be finite, got {dimensions!r}")
    lengths, angles = values[:3], values[3:]
    if lengths == [0.0, 0.0, 0.0]:
        return Box(NO_BOX)
    if min(lengths) <= 0:
        raise ValueError(f"box: lengths must be positive, got {np.array(lengths)!r}")
    if min(angles) <= 0 or max(angles) >= 180:
        raise ValueError(f"box: angles must lie strictly between 0 and 180 degrees, got {np.array(angles)!r}")
    vectors64 = triclinic_vectors(dims32, dtype=np.float64)
    if not vectors64[0, 0] > 0:  # zero vectors: MDAnalysis's answer to an impossible cell
        raise ValueError(f"box: the angles {np.array(angles)!r} do not describe a valid triclinic cell")
    vectors = np.array(vectors64, dtype=np.float32, order="C")  # triclinic_vectors(dims32)
    vectors.setflags(write=False)
    if angles == [90.0, 90.0, 90.0]:
        volume = lengths[0] * lengths[1] * lengths[2]
        kind = ORTHO
    else:
        volume = float(vectors64[0, 0] * vectors64[1, 1] * vectors64[2, 2])
        kind = TRICLINIC
    box = Box(kind, vectors, volume=volume)
    _last_box = (key, box)
    return box


_last_box = None  # (bytes of the float32 dimensions, Box) of the last prepare_box
