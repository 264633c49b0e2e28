r"""The geometry of distances in a plane: what :class:`~mdakit_fastrdf.LateralRDF` (pairs in a
plane) and :class:`~mdakit_fastrdf.CylindricalRDF` (atoms around an axis, the plane's
normal) share, as one object each holds.

A :class:`Plane` checks its normal (and slab), measures each frame's box in the plane (its
area, two in-plane widths and its height along the normal, with the errors of boxes in which
the in-plane minimum image is not defined), turns a frame's positions into what the kernels
histogram (the normal component dropped, or the slab's box types), and normalises counts by
rings (or by the slab's shells).

Why dropping the normal component gives the in-plane minimum image: with the normal along a
box axis whose two other box vectors lie in the plane (``'z'`` in every MDAnalysis box, whose
vectors **a** and **b** lie in the xy plane; ``'x'`` and ``'y'`` in orthorhombic boxes), the
displacement of two flattened positions has no normal component, and a lattice translation
:math:`n_a \mathbf a + n_b \mathbf b + n_c \mathbf c` changes its squared length by the
in-plane part plus :math:`(n_c h)^2`, :math:`h` the box height along the normal. The
images with :math:`n_c = 0` are the in-plane lattice; those with :math:`n_c \ne 0` are at
least :math:`h` away. When **c** is perpendicular to the plane they are never the nearest;
when it is tilted they are out of range as long as :math:`r_\mathrm{max} < h`, which
:meth:`Plane.measure` checks in every frame.

With a slab the positions reach the kernels whole instead, with the normal as their z axis,
and the box types of the slab (``OrthoSlabBox``, ``TriclinicBox<T, M, true>`` in
``geometry.hpp``) count each pair at its nearest image whose normal component is at most
:math:`h`; in a triclinic box they take every image that can count, so no tilt restricts
the range (docs/design.rst, "The slab metric").
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..engine import NO_BOX, ORTHO, ORTHO_SLAB, TRICLINIC_SLAB, Box
from .blocks import frame_sum

__all__ = ["SLAB_DISTANCES", "Plane", "ring_areas", "slab_shell_volumes"]

_AXES = {"x": 0, "y": 1, "z": 2}
#: What a slab's pairs are binned at: the in-plane distance, or the 3D one
SLAB_DISTANCES = ("lateral", "3d")


def ring_areas(edges):
    r"""Areas :math:`\pi (r_{k+1}^2 - r_k^2)` of the rings between ``edges``."""
    edges = np.asarray(edges, dtype=np.float64)
    return np.pi * np.diff(edges * edges)


def slab_shell_volumes(edges, h):
    r"""Volumes of the spherical shells between ``edges`` cut to the slab :math:`|z| \le h`:
    :math:`V(r_{k+1}) - V(r_k)` with :math:`V(R) = 2\pi (R^2 m - m^3/3)`,
    :math:`m = \min(h, R)` (the ball of radius :math:`R` within the slab). For
    :math:`r_k \ge h` this is the ring area times :math:`2h`."""
    edges = np.asarray(edges, dtype=np.float64)
    m = np.minimum(float(h), edges)
    ball = 2.0 * np.pi * (edges * edges * m - m ** 3 / 3.0)
    return np.diff(ball)


def _check_slab(slab, distance):
    """(h or None, w): the slab's half-thickness and the kernels' w (0 in-plane, 1 3D)."""
    if not isinstance(distance, str) or distance not in SLAB_DISTANCES:
        raise ValueError(f"distance must be one of {SLAB_DISTANCES}, got {distance!r}")
    if slab is None:
        if distance != "lateral":
            raise ValueError(
                f"distance={distance!r} bins 3D distances within a slab, and no slab is given: "
                "give slab=h (the largest separation along the normal, Å), or use InterRDF "
                "for 3D distances without one")
        return None, 0.0
    if isinstance(slab, bool) or not isinstance(slab, numbers.Real):
        raise TypeError(f"slab must be a length in Å (the largest |Δz| of a pair along the "
                        f"normal) or None, got {slab!r}")
    if not (math.isfinite(slab) and slab > 0):
        raise ValueError(f"slab must be a positive, finite length in Å (the largest |Δz| of a "
                         f"pair along the normal), got {slab!r}")
    return float(slab), 1.0 if distance == "3d" else 0.0


def _check_normal(normal, name="normal"):
    """The direction `normal` as ('axis', index) or ('vector', unit float64 (3,)); errors
    name the fix and the keyword `name` it was given as."""
    if isinstance(normal, str):
        key = normal.lower()
        if key not in _AXES:
            raise ValueError(f"{name} must be 'x', 'y', 'z' or a 3-vector, got {normal!r}")
        return "axis", _AXES[key]
    try:
        v = np.asarray(normal, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be 'x', 'y', 'z' or a 3-vector, got {normal!r}") from None
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be 'x', 'y', 'z' or a finite 3-vector, got {normal!r}")
    length = float(np.linalg.norm(v))
    if not length > 0:
        what = "the plane's normal" if name == "normal" else "a direction"
        raise ValueError(f"{name} is a vector of zero length: give {what}, e.g. "
                         f"{name}='z' or {name}=(0, 0, 1)")
    v = v / length
    # a vector along an axis is that axis (the exact flattening, and any box)
    for axis in range(3):
        if abs(v[axis]) == 1.0:
            return "axis", axis
    return "vector", v


class Plane:
    """The plane normal to `normal`, optionally with a slab :math:`|\\Delta z| \\le h`.

    Parameters
    ----------
    normal : {'z', 'x', 'y'} or array_like
        The normal, as :class:`~mdakit_fastrdf.LateralRDF` takes it.
    slab : float, optional
        The slab's half-thickness :math:`h` in Å, or None.
    distance : {'lateral', '3d'}
        What a slab's pairs are binned at.
    keyword : str
        The name the user gave the normal as (``'normal'``, ``'axis'``), for messages.
    what : str
        What the histogram is, for the half-width warning.
    line : bool
        The normal is an axis (a line of points, :class:`~mdakit_fastrdf.CylindricalRDF`):
        the box vector **c** must lie along it, so that the lattice maps the line onto
        itself.
    """

    #: one row per frame (``results.frame_plane``): area, two in-plane widths, height
    ROW = 4

    def __init__(self, normal="z", slab=None, distance="lateral", keyword="normal",
                 what="lateral RDF", line=False):
        self.slab, self.slab_w = _check_slab(slab, distance)
        self.keyword, self.what, self.line = keyword, what, line
        self.kind, self.normal = _check_normal(normal, keyword)
        #: as given: the axis letter, or the vector as a tuple of floats
        self.given = normal if isinstance(normal, str) else tuple(float(x) for x in normal)
        self.distance = distance
        if self.slab is not None and self.kind != "axis":
            raise ValueError(
                f"slab needs the {keyword} along a box axis ('z' in any box, 'x' or 'y' in an "
                f"orthorhombic one), got {keyword}={self.given!r}")
        if self.kind == "axis":  # the kernels' axes of a slab: the plane's two, the normal
            self.axes = [k for k in (0, 1, 2) if k != self.normal] + [self.normal]

    # -- each frame ---------------------------------------------------------------------
    def measure(self, box, frame, rmax):
        """(area, in-plane width 1, width 2, height along the normal) of the frame's box,
        NaN without one; errors for what the plane cannot be in this box."""
        if box.kind == NO_BOX:
            return (np.nan,) * 4
        key = self.keyword
        if self.kind == "vector":
            raise ValueError(
                f"{key}={self.given!r} is no box axis, and frame {frame} has a box: its plane "
                "is not a lattice plane, so periodic images in it are not defined. Use "
                f"{key}='x', 'y' or 'z' (rotate the system first if needed)")
        axis = self.normal
        if axis != 2 and box.kind != ORTHO:
            raise ValueError(
                f"{key}={self.given!r} needs an orthorhombic box (frame {frame} is triclinic, "
                "and only its vectors a and b lie in a plane of the axes, the xy plane): use "
                f"{key}='z', or a system whose plane is xy")
        # the two box vectors in the plane (a, b for z; orthorhombic for x, y), the third
        # (scalar arithmetic: a few µs, where NumPy's cross product takes ~0.1 ms a frame)
        i, j = [k for k in range(3) if k != axis]
        rows = box.vectors32.tolist()  # the float32 values as exact Python floats
        a, b, c = rows[i], rows[j], rows[axis]
        area = abs(a[i] * b[j] - a[j] * b[i])  # the normal's component of a x b
        height = abs(c[axis])
        w1 = area / math.sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2])  # width across b
        w2 = area / math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
        tilted = c[i] != 0.0 or c[j] != 0.0
        if tilted and self.line:
            raise ValueError(
                f"{key}={self.given!r}: frame {frame}'s box vector c is tilted out of the "
                f"{key} ({c} Å), so the periodic images of the {key} along c are not on it but "
                f"beside it, and the distance from the nearest image of the {key} is not "
                "defined. Use a box whose third vector lies along the axis (orthorhombic, "
                "hexagonal or any box with alpha = beta = 90°)")
        if tilted and self.slab is None and not rmax < height:
            raise ValueError(
                f"range reaches rmax = {rmax:g} Å, not below the box height along the {key} "
                f"({height:.6g} Å in frame {frame}), in a box whose third vector is tilted out "
                f"of the {key}: images of that vector could come within range at a smaller "
                "in-plane distance. Use a smaller range")
        return area, w1, w2, height

    def to_kernels(self, coords, box, frame):
        """`coords` (wrapped, float32, changed in place) made what the kernels histogram,
        and the box they histogram them in."""
        if self.slab is not None:
            if box.kind == NO_BOX:
                raise ValueError(f"slab needs a periodic box, and frame {frame} has none: "
                                 "leave slab=None, or set the box")
            # whole positions, the normal as the kernels' z (a triclinic box: 'z', measure)
            slab = (self.slab, self.slab_w)
            if box.kind != ORTHO:
                return Box(TRICLINIC_SLAB, box.vectors32, slab)
            if self.axes != [0, 1, 2]:
                coords[:] = coords[:, self.axes]
            lengths = np.diag(box.vectors32)[self.axes]
            return Box(ORTHO_SLAB, np.diag(lengths).astype(np.float32), slab)
        if self.kind == "axis":
            coords[:, self.normal] = 0.0
        else:  # no box: project onto the plane through the origin (float64, then float32)
            p = coords.astype(np.float64)
            p -= np.outer(p @ self.normal, self.normal)
            coords[:] = p
        return box

    # -- normalisation ------------------------------------------------------------------
    @staticmethod
    def mean_area(rows, n_frames):
        """The frames' mean area of the box in the plane (NaN where a frame has no box)."""
        return frame_sum(rows)[0] / n_frames

    def slab_shells(self, edges, rows):
        """The frames' mean of each bin's shell within the slab, Å³ (:math:`h_f = \\min(h,
        H_f / 2)` in a frame of height :math:`H_f`: no image is further away)."""
        plane = np.asarray(rows, dtype=np.float64)
        h_f = np.minimum(self.slab, plane[:, 3] / 2)

        def shells(h):
            return (ring_areas(edges) * 2 * h if self.slab_w == 0.0
                    else slab_shell_volumes(edges, h))

        if np.all(h_f == h_f[0]):  # the usual case: every box at least 2h high
            return shells(h_f[0])
        total = np.zeros(len(edges) - 1)
        for h in np.unique(h_f):  # the frames of each h_f alike
            total += shells(h) * np.count_nonzero(h_f == h)
        return total / len(plane)

    def normalised(self, count, n_pairs, norm, edges, rows, n_frames):
        """`count` of `n_frames` frames (their rows: ``results.frame_plane``) normalised by
        rings of the plane (or the slab's shells) and, for ``norm='rdf'``, the density of
        `n_pairs` in the plane (in the slab's volume)."""
        if self.slab is not None:
            factor = n_frames
            if norm in ("rdf", "density"):
                factor = factor * self.slab_shells(edges, rows)
            if norm == "rdf":
                plane = np.asarray(rows, dtype=np.float64)
                volume = float(frame_sum(plane[:, 0] * plane[:, 3])) / n_frames
                factor = factor * (n_pairs / volume)
            return count / factor
        factor = n_frames
        if norm in ("rdf", "density"):
            factor = factor * ring_areas(edges)
        if norm == "rdf":
            area = self.mean_area(rows, n_frames)
            if not np.isfinite(area):
                raise ValueError("norm='rdf' needs the box area in the plane, but a frame has "
                                 "no box: use norm='density' or 'none'")
            factor = factor * (n_pairs / area)
        return count / factor

    def half_width_message(self, rows, rmax):
        """The warning when `rmax` passes half the smallest in-plane width of the frames'
        boxes, or None."""
        plane = np.asarray(rows if rows is not None else np.empty((0, 4)), dtype=np.float64)
        if not len(plane) or not np.all(np.isfinite(plane[:, 1:3])):
            return None
        widths = plane[:, 1:3].min(axis=0)
        axis = int(np.argmin(widths))
        half = widths[axis] / 2
        if not rmax > half * (1 + 1e-12):
            return None
        return (f"range reaches rmax = {rmax:g} Å, beyond half the smallest in-plane width of "
                f"the box ({widths[axis]:.6g} Å at its smallest over the analysed frames, half "
                f"of it {half:.6g} Å): each pair is counted once, at its in-plane "
                f"minimum-image distance, so the {self.what} is complete only up to {half:.6g} Å.")
