r"""Lateral (in-plane, two-dimensional) radial distribution functions.

:class:`LateralRDF` is :class:`~mdakit_fastrdf.InterRDF` with distances measured in a plane:
the component of every position along the plane's normal is set to zero before the
frame's positions reach the same compiled kernels (CPU, GPU, all pairs and cell lists), so
the kernels histogram the in-plane minimum-image distances, and the shells of the
normalisation are rings. This is GROMACS's ``gmx rdf -xy`` for a normal along z, and the
non-3D RDF asked for in MDAnalysis issue #3201 (which notes that zeroing a coordinate is
not enough: the normalisation must be two-dimensional).

The geometry (the normal, the slab, the box in the plane, the rings) is a
:class:`~mdakit_fastrdf.analysis.plane.Plane`, which :class:`~mdakit_fastrdf.CylindricalRDF`
holds too; :mod:`mdakit_fastrdf.analysis.plane` says why dropping the normal component gives
the in-plane minimum image, and how a slab is counted.
"""

from __future__ import annotations

import numpy as np

from .blocks import frame_sum
from .declarations import Field, OutputSpec, Table, histogram_fields, shell_fields
from .plane import SLAB_DISTANCES, Plane, ring_areas, slab_shell_volumes  # noqa: F401
from .rdf import InterRDF
from .rdf_command import LATERAL_COMMAND

__all__ = ["LateralRDF", "ring_areas", "slab_shell_volumes"]


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
        plane = Plane(normal, slab, distance)  # (checked before the groups)
        super().__init__(g1, g2, nbins=nbins, range=range, norm=norm,
                         exclusion_block=exclusion_block, exclude_same=exclude_same, **kwargs)
        #: the plane (:class:`~mdakit_fastrdf.analysis.plane.Plane`): the base measures each
        #: frame's box in it, histograms in it and normalises by its rings
        self.geometry = plane
        self.normal, self.normal_kind = plane.given, plane.kind
        self.slab, self.distance = plane.slab, distance

    # -- normalisation ----------------------------------------------------------------
    def _normalise(self, res):
        super()._normalise(res)
        plane = np.asarray(res.frame_plane, dtype=np.float64)
        if len(plane) and np.all(np.isfinite(plane[:, 0])):
            res.area_cum = float(frame_sum(plane)[0])
            res.rho = np.asarray(self._group_sizes(), dtype=np.float64) / (
                res.area_cum / self.n_frames)
        else:
            res.pop("rho", None)

    def _output_parameters(self):
        out = {**super()._output_parameters(), "normal": self.normal}
        if self.slab is not None:
            out.update(slab=self.slab, distance=self.distance)
        return out
