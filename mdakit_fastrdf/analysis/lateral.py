r"""Lateral (in-plane, two-dimensional) radial distribution functions.

:class:`LateralRDF` is :class:`~mdakit_fastrdf.InterRDF` with distances measured in a plane:
the component of every position along the plane's normal is set to zero before the
frame's positions reach the same compiled kernels (CPU, GPU, all pairs and cell lists), so
the kernels histogram the in-plane minimum-image distances, and the shells of the
normalisation are rings. This is GROMACS's ``gmx rdf -xy`` for a normal along z, and the
non-3D RDF asked for in MDAnalysis issue #3201 (which notes that zeroing a coordinate is
not enough: the normalisation must be two-dimensional).

Why zeroing the normal component gives the in-plane minimum image: with the normal along a
box axis whose two other box vectors lie in the plane (``'z'`` in every MDAnalysis box, whose
vectors **a** and **b** lie in the xy plane; ``'x'`` and ``'y'`` in orthorhombic boxes), the
displacement of two flattened positions has no normal component, and a lattice translation
:math:`n_a \mathbf a + n_b \mathbf b + n_c \mathbf c` changes its squared length by the
in-plane part plus :math:`(n_c h)^2`, :math:`h` the box height along the normal. The
images with :math:`n_c = 0` are the in-plane lattice; those with :math:`n_c \ne 0` are at
least :math:`h` away. When **c** is perpendicular to the plane they are never the nearest;
when it is tilted they are out of range as long as :math:`r_\mathrm{max} < h`, which
:meth:`LateralRDF.run` checks in every frame.

With a slab (``slab=h``) the positions reach the kernels whole instead, with the normal as
their z axis, and the box types of the slab (``OrthoSlabBox``, ``TriclinicBox<T, M, true>``
in ``geometry.hpp``) count each pair at its nearest image whose normal component is at most
:math:`h`; in a triclinic box they take every image that can count, so no tilt restricts
the range (docs/design.rst, "The slab metric").
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..engine import NO_BOX, ORTHO, ORTHO_SLAB, TRICLINIC_SLAB, Box
from .blocks import frame_sum
from .coords import prepare_coordinates
from .declarations import Field, OutputSpec, Table, histogram_fields, shell_fields
from .rdf import InterRDF
from .rdf_command import LATERAL_COMMAND

__all__ = ["LateralRDF", "ring_areas", "slab_shell_volumes"]

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


class LateralRDF(InterRDF):
    r"""Lateral (two-dimensional) radial distribution function in a plane.

    The RDF of the in-plane distances between the atoms of `g1` and `g2`: each position's
    component along the plane's `normal` is dropped, the in-plane minimum-image distances
    are histogrammed by the package's kernels, and the normalisation counts rings instead
    of spherical shells (Notes). For membranes and interfaces: e.g. the lateral P–P RDF of a
    lipid bilayer, or of one leaflet with an UpdatingAtomGroup such as
    ``u.select_atoms("name P and prop z > 50", updating=True)``.

    Parameters
    ----------
    g1, g2 : AtomGroup or UpdatingAtomGroup
        The two groups, as in :class:`~mdakit_fastrdf.InterRDF`.
    nbins, range, norm, exclusion_block, exclude_same
        As in :class:`~mdakit_fastrdf.InterRDF`; `range` is in-plane distance in Å.
    normal : {'z', 'x', 'y'} or array_like, optional
        Keyword only. The plane's normal (default ``'z'``: the xy plane, GROMACS's
        ``-xy``). ``'z'`` works in every box (MDAnalysis puts the box vectors **a** and
        **b** in the xy plane); ``'x'`` and ``'y'`` need an orthorhombic box. A 3-vector
        along an axis is that axis; any other vector is allowed only without a box (the
        positions are projected onto the plane through the origin; with a box the plane
        would not be a lattice plane, so periodic images in it are not defined: a
        ValueError).
    slab : float, optional
        Keyword only. Count only the pairs whose separation along the normal (minimum image)
        is at most `slab` Å, :math:`|\Delta z| \le h`: a slab of thickness :math:`2h`
        around each atom of `g1` (maicos's ``dzheight``; GROMACS has no equivalent). None
        (default): every pair, whatever its height. Each pair counts at its nearest periodic
        image within the slab. Needs a box; normals as without a slab (``'z'`` in any box).
        The condition is part of the compiled kernels' metric, on every device.
    distance : {'lateral', '3d'}, optional
        Keyword only. What a pair in the slab is binned at: its in-plane distance
        (``'lateral'``, default) or its 3D distance (``'3d'``, maicos ``PDFPlanar``'s
        choice; needs `slab`).
    device, precision, n_threads, method, compound, center, unwrap
        As in :class:`~mdakit_fastrdf.InterRDF` (keyword only).

    Attributes
    ----------
    results.rdf : numpy.ndarray
        The normalised histogram (Notes).
    results.area_cum : float
        Sum over the frames of the box's area in the plane, Å² (``norm='rdf'``).
    results.rho : numpy.ndarray
        ``(2,)``: the frame-averaged in-plane number densities of `g1` and `g2`,
        :math:`N_X / \langle A \rangle` in Å⁻² (with a box; also with a slab, whose
        ``norm='rdf'`` divides by the 3D density :math:`N_\mathrm{pairs} / \langle V
        \rangle` instead, Notes).
    results.frame_plane : numpy.ndarray
        ``(n_frames, 4)``: each frame's in-plane area, the two in-plane widths of the
        box (Å) and its height along the normal (Å); NaN without a box.

    Other results (``count``, ``count_uint64``, ``cdf``, ``coordination``, ``n_pairs``,
    ``bins``, ``edges``) are those of :class:`~mdakit_fastrdf.InterRDF`.

    Notes
    -----
    With :math:`n_k` the count of bin :math:`k` over :math:`N_\mathrm{frames}` frames and
    :math:`A_k = \pi(r_{k+1}^2 - r_k^2)` the ring areas:

    .. math::

        g_\mathrm{rdf}(r_k) = \frac{n_k}{N_\mathrm{frames}\, A_k\, N_\mathrm{pairs} /
        \langle A \rangle}, \qquad
        g_\mathrm{density}(r_k) = \frac{n_k}{N_\mathrm{frames}\, A_k}, \qquad
        g_\mathrm{none}(r_k) = \frac{n_k}{N_\mathrm{frames}}

    where :math:`\langle A \rangle` is the frame-averaged area of the box in the plane
    (:math:`|\mathbf a \times \mathbf b|` for ``normal='z'``) and :math:`N_\mathrm{pairs}`
    is InterRDF's (:math:`N_A N_B` less an ``exclusion_block``'s pairs; per frame with
    UpdatingAtomGroups). Atoms at any height count: every pair is binned at its in-plane
    distance (restrict the heights with the selections, e.g. one leaflet). A uniform layer
    gives :math:`g \to 1`.

    **With a slab** (:math:`|\Delta z| \le h`, Δz the minimum-image separation along the
    normal) the shells are the parts of the slab :math:`|z| \le h_f` around each atom of
    `g1` within the bin, :math:`h_f = \min(h, H_f / 2)` in frame :math:`f` of height
    :math:`H_f` along the normal (no image is further away), and the reference density is the
    3D one, :math:`N_\mathrm{pairs} / \langle V \rangle`:

    .. math::

        g_\mathrm{rdf}(r_k) = \frac{n_k}{N_\mathrm{frames}\, \bar S_k\, N_\mathrm{pairs} /
        \langle V \rangle}, \qquad
        g_\mathrm{density}(r_k) = \frac{n_k}{N_\mathrm{frames}\, \bar S_k},

    with :math:`\bar S_k` the frame average of :math:`A_k \cdot 2 h_f` (``distance='lateral'``:
    rings of height :math:`2h_f`) or of the sphere's shell cut to the slab,
    :math:`V(r_{k+1}) - V(r_k)`, :math:`V(R) = 2\pi(R^2 m - m^3/3)`, :math:`m = \min(h_f, R)`
    (``distance='3d'``; :func:`slab_shell_volumes`). Both give :math:`g \to 1` in a uniform
    fluid. maicos's ``PDFPlanar`` divides by :math:`A_k \cdot 2h` in every bin, which equals
    :math:`\bar S_k` for :math:`r_k \ge h`; below :math:`h` its ring volume is larger than the
    region its pairs come from. In single precision the slab's test is made on the float
    separation against ``float(h)``; in double precision the CPU's float filter also flags
    the pairs whose float separation lies within its proven bound of ``h`` and recomputes
    them in double (the GPU runs slab frames all in double): the counts are those of the
    all-double arithmetic either way.

    The in-plane minimum image is exact when the box vectors spanning the plane are
    lattice vectors of it (see the module); with a box vector **c** tilted out of the
    normal, the range must stay below the box height :math:`h` along the normal, else
    :meth:`run` raises a ValueError naming the frame. Beyond half the smallest in-plane
    width of the box the RDF is incomplete, and :meth:`run` warns once.
    """

    #: the blocks' in-plane densities come from _normalise (a declared block field), not
    #: from BoxStatistics's box volumes
    volume_densities = False

    coordinates = "wrapped"
    #: ``mdakit-fastrdf --lateral AXIS``: a variant of InterRDF's command (:mod:`.rdf_command`)
    command = LATERAL_COMMAND
    #: the keyword of the direction in messages, and what the histogram is (for a subclass)
    _normal_keyword = "normal"
    _what = "lateral RDF"
    outputs = OutputSpec(
        fields=histogram_fields() + shell_fields("g2 around g1 in the plane") + (
            Field("n_pairs", "pairs", "N_pairs of norm='rdf'"),
            Field("area_cum", "Å^2", "summed in-plane box area of the frames"),
            Field("rho", "Å^-2", "in-plane number density N / <A> of each group",
                  blocks=True),
        ),
        tables=(Table(fields=("rdf", "count_uint64", "cdf", "coordination")),),
    )

    #: what the running coordination number counts (the plot's second axis)
    _coordination_label = "second group's atoms around an atom of the first, in the plane"

    @classmethod
    def _plot_axes(cls, results, parameters):
        """Axes over the in-plane distance :math:`r_{xy}` (or the plane of another
        normal), titled with the plane (and the slab)."""
        from .declarations import PlotAxes

        if parameters.get("analysis") != "LateralRDF":  # a subclass draws its own way
            return None
        normal = parameters.get("normal", "z")
        if isinstance(normal, str):
            plane = {"x": "yz", "y": "xz", "z": "xy"}[normal.lower()]
            r, where = f"$r_{{{plane}}}$", f"in the {plane} plane"
        else:
            r = "$r_\\parallel$"
            where = "in the plane normal to ({})".format(", ".join(f"{v:.3g}" for v in normal))
        slab, distance = parameters.get("slab"), parameters.get("distance", "lateral")
        norm = parameters["norm"]
        if slab is not None and distance == "3d":
            xlabel = f"3D distance r (Å), pairs with |Δz| ≤ {slab:g} Å"
        else:
            xlabel = f"in-plane distance {r} (Å)"
        area = "Å$^{-3}$" if slab is not None else "Å$^{-2}$"
        ylabel = {"rdf": f"g({r})", "density": f"ρ({r}) ({area})",
                  "none": "n(r) (pairs per frame)"}[norm]
        title = f"Lateral RDF {where}"
        if slab is not None:
            title += f", slab |Δz| ≤ {slab:g} Å"
        return PlotAxes(x=np.asarray(results.bins), xlabel=xlabel, ylabel=ylabel,
                        xlim=(float(results.edges[0]), float(results.edges[-1])),
                        reference=1.0 if norm == "rdf" else None, title=title)

    def __init__(self, g1, g2, nbins=75, range=(0.0, 15.0), norm="rdf", exclusion_block=None,
                 exclude_same=None, *, normal="z", slab=None, distance="lateral", **kwargs):
        if kwargs.get("normalization_mode", "exact") != "exact":
            raise ValueError("LateralRDF takes normalization_mode='exact' only")
        self._slab_h, self._slab_w = _check_slab(slab, distance)
        super().__init__(g1, g2, nbins=nbins, range=range, norm=norm,
                         exclusion_block=exclusion_block, exclude_same=exclude_same, **kwargs)
        self.normal_kind, self._normal = _check_normal(normal, self._normal_keyword)
        self.normal = normal if isinstance(normal, str) else tuple(float(x) for x in normal)
        if self._slab_h is not None and self.normal_kind != "axis":
            raise ValueError(
                f"slab needs the {self._normal_keyword} along a box axis ('z' in any box, 'x' "
                f"or 'y' in an orthorhombic one), got {self._normal_keyword}={self.normal!r}")
        self.slab = self._slab_h
        self.distance = distance
        if self._slab_h is not None:  # the kernels' axes: the plane's two, then the normal
            self._axes = [k for k in (0, 1, 2) if k != self._normal] + [self._normal]

    # -- per frame --------------------------------------------------------------------
    def _frame_rows(self):
        return {**super()._frame_rows(), "frame_plane": (4,)}

    def _plane(self, box):
        """(area, in-plane width 1, width 2, height along the normal) of the frame's box;
        errors for what the plane cannot be in this box."""
        if box.kind == NO_BOX:
            return (np.nan,) * 4
        key = self._normal_keyword
        if self.normal_kind == "vector":
            raise ValueError(
                f"{key}={self.normal!r} is no box axis, and frame {self._ts.frame} has a box: "
                "its plane is not a lattice plane, so periodic images in it are not defined. "
                f"Use {key}='x', 'y' or 'z' (rotate the system first if needed)")
        axis = self._normal
        if axis != 2 and box.kind != ORTHO:
            raise ValueError(
                f"{key}={self.normal!r} needs an orthorhombic box (frame {self._ts.frame} is "
                "triclinic, and only its vectors a and b lie in a plane of the axes, the xy "
                f"plane): use {key}='z', or a system whose plane is xy")
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
        if tilted and self._slab_h is None and not self.rmax < height:
            raise ValueError(
                f"range reaches rmax = {self.rmax:g} Å, not below the box height along the "
                f"{key} ({height:.6g} Å in frame {self._ts.frame}), in a box whose third "
                f"vector is tilted out of the {key}: images of that vector could come within "
                "range at a smaller in-plane distance. Use a smaller range")
        return area, w1, w2, height

    def _frame_box(self):
        box = super()._frame_box()
        self._store_frame("frame_plane", self._plane(box))
        return box

    def _accumulate(self, coords, box):
        (_, _, n1, n2), = self.layout.segments
        box = prepare_coordinates("wrapped", box, coords, (n1, n2), self.rmax)
        if self._slab_h is not None:
            if box.kind == NO_BOX:
                raise ValueError(
                    f"slab needs a periodic box, and frame {self._ts.frame} has none: leave "
                    "slab=None, or set the box")
            # whole positions, the normal as the kernels' z (a triclinic box: 'z', _plane)
            slab = (self._slab_h, self._slab_w)
            if box.kind == ORTHO:
                axes = self._axes
                if axes != [0, 1, 2]:
                    coords[:] = coords[:, axes]
                lengths = np.diag(box.vectors32)[axes]
                box = Box(ORTHO_SLAB, np.diag(lengths).astype(np.float32), slab)
            else:
                box = Box(TRICLINIC_SLAB, box.vectors32, slab)
        elif self.normal_kind == "axis":
            coords[:, self._normal] = 0.0
        else:  # no box: project onto the plane through the origin (float64, then float32)
            p = coords.astype(np.float64)
            p -= np.outer(p @ self._normal, self._normal)
            coords[:] = p
        self._histogram(coords, box)

    # -- normalisation ----------------------------------------------------------------
    def _mean_area(self):
        return frame_sum(self.results.frame_plane)[0] / self.n_frames

    def _slab_shells(self):
        """The mean over the frames of each bin's shell within the slab, Å³ (Notes)."""
        plane = np.asarray(self.results.frame_plane, dtype=np.float64)
        edges = self.results.edges
        total = np.zeros(len(edges) - 1)
        # h_f = min(h, H_f / 2): one value for every frame whose box is at least 2h high
        h_f = np.minimum(self._slab_h, plane[:, 3] / 2)

        def shells(h):
            return (ring_areas(edges) * 2 * h if self._slab_w == 0.0
                    else slab_shell_volumes(edges, h))

        if np.all(h_f == h_f[0]):  # the usual case: every box at least 2h high
            return shells(h_f[0])
        for h in np.unique(h_f):  # the frames of each h_f alike
            total += shells(h) * np.count_nonzero(h_f == h)
        return total / len(plane)

    def _normalised(self, count, n_pairs=1):
        if self._slab_h is not None:
            factor = self.n_frames
            if self.norm in ("rdf", "density"):
                factor = factor * self._slab_shells()
            if self.norm == "rdf":
                plane = np.asarray(self.results.frame_plane, dtype=np.float64)
                volume = float(frame_sum(plane[:, 0] * plane[:, 3])) / self.n_frames
                factor = factor * (n_pairs / volume)
            return count / factor
        factor = self.n_frames
        if self.norm in ("rdf", "density"):
            factor = factor * ring_areas(self.results.edges)
        if self.norm == "rdf":
            area = self._mean_area()
            if not np.isfinite(area):
                raise ValueError("norm='rdf' needs the box area in the plane, but a frame has "
                                 "no box: use norm='density' or 'none'")
            factor = factor * (n_pairs / area)
        return count / factor

    def _normalise(self, res):
        super()._normalise(res)
        plane = np.asarray(res.frame_plane, dtype=np.float64)
        if len(plane) and np.all(np.isfinite(plane[:, 0])):
            res.area_cum = float(frame_sum(plane)[0])
            res.rho = np.asarray(self._group_sizes(), dtype=np.float64) / (
                res.area_cum / self.n_frames)
        else:
            res.pop("rho", None)

    def _half_width_message(self):
        plane = np.asarray(self.results.get("frame_plane", np.empty((0, 4))), dtype=np.float64)
        if not len(plane) or not np.all(np.isfinite(plane[:, 1:3])):
            return None
        widths = plane[:, 1:3].min(axis=0)
        axis = int(np.argmin(widths))
        half = widths[axis] / 2
        rmax = self.rdf_settings["range"][1]
        if not rmax > half * (1 + 1e-12):
            return None
        return (f"range reaches rmax = {rmax:g} Å, beyond half the smallest in-plane width of "
                f"the box ({widths[axis]:.6g} Å at its smallest over the analysed frames, half "
                f"of it {half:.6g} Å): each pair is counted once, at its in-plane "
                f"minimum-image distance, so the {self._what} is complete only up to "
                f"{half:.6g} Å.")

    def _output_parameters(self):
        out = {**super()._output_parameters(), "normal": self.normal}
        if self._slab_h is not None:
            out.update(slab=self._slab_h, distance=self.distance)
        return out

