r"""Cylindrical radial distribution functions: the atoms of a group around an axis.

:class:`CylindricalRDF` histograms the distance of every atom of a group from an axis (a
channel, a nanotube, a pore, the axis of a cylindrical micelle) and normalises it by
cylindrical shells, so that atoms filling space uniformly give :math:`g = 1`. It adds no
kernel: it histograms the pairs of one *axis site* (a point of the axis, one row of the
frame's coordinate block) and the atoms in the plane normal to the axis, the
:class:`~mdakit_fastrdf.analysis.plane.Plane` that :class:`~mdakit_fastrdf.LateralRDF`
also holds. Dropping every position's component along the axis makes the in-plane distance
of the site and an atom the atom's distance from the axis, and the in-plane minimum image
makes it the distance from the nearest periodic image of the axis (exact for the reasons
given in :mod:`mdakit_fastrdf.analysis.plane`). The kernels, the parallel backends and ``blocks=``
are those of every other analysis.

maicos users will know the geometry from ``DensityCylinder`` (``dim`` is `axis` here,
``refgroup`` the same name, ``rmin``/``rmax``/``bin_width`` are `range` and `nbins`);
``norm='density'`` gives its number density profile, ``norm='rdf'`` that profile divided
by a reference density (see :class:`CylindricalRDF`).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from MDAnalysis.core.groups import AtomGroup

from ..engine import NO_BOX
from .base import PairLayout
from .blocks import frame_sum
from .centres import CompoundCentres, compound_centres
from .checks import check_atomgroup, is_updating
from .centres import needs_attribute
from .declarations import Command, Field, Option, OutputSpec, Table, histogram_fields
from .plane import Plane, ring_areas
from .rdf import InterRDF

__all__ = ["DENSITIES", "CylindricalRDF"]

#: Reference densities of ``norm='rdf'`` (:class:`CylindricalRDF`'s `density`).
DENSITIES = ("box", "cylinder")


def _check_origin(origin):
    """`origin` as a float64 ``(3,)`` point, or None."""
    if origin is None:
        return None
    if isinstance(origin, (str, bytes, AtomGroup)):
        raise TypeError(f"origin must be a point (x, y, z) in Å, got {origin!r}; for the "
                        "centre of an AtomGroup in every frame use refgroup=")
    try:
        v = np.asarray(origin, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"origin must be a point (x, y, z) in Å, got {origin!r}") from None
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ValueError(f"origin must be a finite point (x, y, z) in Å, got {origin!r}")
    return v


def _check_refgroup(refgroup, atomgroup):
    """`refgroup` as an AtomGroup of `atomgroup`'s Universe (a string is a selection in it),
    or None."""
    if refgroup is None:
        return None
    if isinstance(refgroup, str):
        selection = refgroup
        refgroup = atomgroup.universe.select_atoms(selection)
        if len(refgroup) == 0:
            raise ValueError(f"refgroup={selection!r} selects no atom: its centre in every "
                             "frame is the point of the axis")
    check_atomgroup(refgroup, "refgroup", updating=True)
    if refgroup.universe is not atomgroup.universe:
        raise ValueError("refgroup and atomgroup must belong to the same Universe")
    return refgroup


class CylindricalRDF(InterRDF):
    r"""Radial distribution function of the atoms of a group around an axis.

    The distance of each atom of `atomgroup` from an axis (along `axis`, through a point
    `origin` or through the centre of `refgroup` in every frame) is histogrammed with the
    package's kernels, with the minimum image of the periodic box in the plane normal to
    the axis (the distance from the nearest image of the axis), and normalised by the
    volumes of cylindrical shells (Notes). For water in a channel, a nanotube or a pore,
    ions around DNA, solvent around a cylindrical micelle.

    Parameters
    ----------
    atomgroup : AtomGroup or UpdatingAtomGroup
        The atoms whose distances from the axis are histogrammed. An UpdatingAtomGroup is
        selected again in every frame (e.g. the water of a slab along the axis,
        ``u.select_atoms("name OW and prop z > 40 and prop z < 60", updating=True)``; then
        give that slab's `height`); the normalisation takes the mean of its sizes.
    nbins : int, optional
        Number of bins (default 75).
    range : tuple of float, optional
        ``(rmin, rmax)``: distances from the axis in Å (default ``(0, 15)``).
    norm : {'rdf', 'density', 'none'}, optional
        ``'rdf'`` (default): :math:`g(r)`, the number density at :math:`r` divided by the
        reference density of `density`; ``'density'``: the number density profile
        :math:`\rho(r)` in Å⁻³; ``'none'``: atoms per bin and frame (Notes).
    axis : {'z', 'x', 'y'} or array_like, optional
        Keyword only. Direction of the axis (default ``'z'``). ``'z'`` needs a box whose
        vector **c** lies along z (alpha = beta = 90°: orthorhombic, hexagonal, any
        :math:`\gamma`; MDAnalysis puts **a** and **b** in the xy plane); ``'x'`` and
        ``'y'`` need an orthorhombic box. A 3-vector along a coordinate axis is that axis;
        any other vector only without a box (with one, the plane normal to it is no lattice
        plane and periodic images in it are not defined: a ValueError).
    origin : array_like, optional
        Keyword only. A point ``(x, y, z)`` of the axis in Å, the same in every frame.
    refgroup : AtomGroup or str, optional
        Keyword only. The axis passes through the centre of this group in every frame
        (e.g. the carbon atoms of a nanotube, a channel's protein, a micelle); a string is a
        selection in `atomgroup`'s Universe. Not together with `origin`. Without either, the
        axis passes through the centre of the box, :math:`(\mathbf a + \mathbf b +
        \mathbf c)/2`, in every frame (maicos's default); without a box that is an error.
    center : {'geometry', 'mass'}, optional
        Keyword only. With `refgroup`: its centre of geometry (default) or of mass.
    unwrap : bool, optional
        Keyword only. With `refgroup`: make it whole along its bonds before its centre is
        taken (MDAnalysis's ``AtomGroup.center(..., unwrap=True)``; needs bonds connecting
        the whole group). Default ``False``: the positions as the trajectory gives them,
        so the group must not be split by the box in the plane normal to the axis (centre
        it first, e.g. with MDAnalysis's ``center_in_box`` transformation). Its position
        along the axis does not matter.
    density : {'box', 'cylinder'}, optional
        Keyword only. The reference density of ``norm='rdf'`` (Notes): ``'box'`` (default)
        the density of the group in the box, so that :math:`g \to 1` where the atoms are as
        dense as on average in the box (a uniform fluid around a thin axis; the convention of
        :class:`~mdakit_fastrdf.InterRDF` and :class:`~mdakit_fastrdf.LateralRDF`);
        ``'cylinder'`` the density of the group in the analysed cylindrical shell
        :math:`r_\mathrm{min} \le r \le r_\mathrm{max}`, so that the atoms uniformly filling
        a cylinder around the axis of radius at least :math:`r_\mathrm{max}` give
        :math:`g = 1` (the fluid in a pore; needs no box).
    height : float, optional
        Keyword only. The length :math:`L` of the cylinders along the axis in Å. Default:
        the box length along the axis (the frames' mean). Give it without a box (for
        ``norm='density'`` and ``results.rho``) or when `atomgroup` holds only the atoms of
        a slab of that height (an UpdatingAtomGroup); atoms at any position along the axis
        are counted, whatever `height`.
    device, precision, n_threads, method
        As in :class:`~mdakit_fastrdf.InterRDF` (keyword only).

    Attributes
    ----------
    results.bins, results.edges : numpy.ndarray
        Bin centres and edges, distances from the axis in Å.
    results.count : numpy.ndarray
        Atoms in each bin, summed over the frames (float64; exact in
        ``results.count_uint64``).
    results.rdf : numpy.ndarray
        The normalised histogram (Notes).
    results.cdf, results.coordination : numpy.ndarray
        Atoms within the upper edge of each bin from the axis, per frame (the two are
        equal: one axis).
    results.n_pairs : float
        :math:`\langle N \rangle`, the atoms of `atomgroup` per frame (mean over the frames
        for an UpdatingAtomGroup).
    results.rho : float
        The reference density :math:`\rho` of `density` in Å⁻³ (Notes), whatever `norm`;
        absent when the length :math:`L` is not known (no box and no `height`, or
        ``density='box'`` without a box).
    results.length : float
        :math:`L` in Å: `height`, or the mean box length along the axis (NaN without).
    results.area_cum : float
        Sum over the frames of the box's cross-section normal to the axis, Å² (with a box).
    results.frame_origin : numpy.ndarray
        ``(n_frames, 3)``: the point of the axis in each frame (`origin`, the centre of
        `refgroup` or of the box), before it is wrapped into the box.
    results.frame_plane : numpy.ndarray
        ``(n_frames, 4)``: each frame's cross-section, the two widths of the box normal to
        the axis and its length along the axis (Å); NaN without a box.

    Notes
    -----
    With :math:`n_k` the count of bin :math:`k` over :math:`N_\mathrm{frames}` frames, the
    edges :math:`r_k`, :math:`L` the length along the axis and

    .. math::

        V_k = \pi (r_{k+1}^2 - r_k^2) L = 2\pi \bar r_k\, \Delta r\, L

    the volume of the cylindrical shell of bin :math:`k` (:math:`\bar r_k` its centre,
    :math:`\Delta r` its width):

    .. math::

        \rho(r_k) = \frac{n_k}{N_\mathrm{frames} V_k}\ (\texttt{norm='density'}), \qquad
        g(r_k) = \frac{\rho(r_k)}{\rho}\ (\texttt{norm='rdf'}), \qquad
        \frac{n_k}{N_\mathrm{frames}}\ (\texttt{norm='none'})

    with the reference density :math:`\rho` of `density`:

    .. math::

        \rho_\mathrm{box} = \frac{\langle N \rangle}{\langle A \rangle L}, \qquad
        \rho_\mathrm{cylinder} = \frac{\sum_k n_k}{N_\mathrm{frames}\,
        \pi (r_\mathrm{max}^2 - r_\mathrm{min}^2) L},

    :math:`\langle N \rangle` the atoms of `atomgroup` per frame, :math:`\langle A \rangle`
    the frame-averaged cross-section of the box normal to the axis (:math:`|\mathbf a
    \times \mathbf b|` for ``axis='z'``; :math:`\langle A \rangle L` is the box volume when
    :math:`L` is the box length), and :math:`\sum_k n_k / N_\mathrm{frames}` the atoms
    per frame within the analysed shell. :math:`L` cancels in :math:`g`:

    .. math::

        g_\mathrm{box}(r_k) = \frac{n_k}{N_\mathrm{frames}\, A_k\, \langle N \rangle /
        \langle A \rangle}, \qquad
        g_\mathrm{cylinder}(r_k) = \frac{n_k\, \pi (r_\mathrm{max}^2 - r_\mathrm{min}^2)}
        {A_k \sum_{k'} n_{k'}}, \qquad A_k = \pi (r_{k+1}^2 - r_k^2),

    so ``density='box'`` is :class:`~mdakit_fastrdf.LateralRDF`'s normalisation of one
    axis against :math:`\langle N \rangle` atoms, and ``density='cylinder'`` needs no box:
    the area-weighted mean of :math:`g_\mathrm{cylinder}` over the bins is 1.
    ``norm='density'`` and ``results.rho`` need :math:`L`. Every atom is counted at its
    distance from the axis whatever its position along it.

    The distance is taken from the nearest periodic image of the axis (in the plane normal
    to it: the images :math:`n_a \mathbf a + n_b \mathbf b` for ``axis='z'``). That needs
    the box vector along the axis to lie on it (**c** along z: alpha = beta = 90°, as in
    orthorhombic and hexagonal boxes; any :math:`\gamma`), so that the lattice maps the
    axis onto itself; a box whose **c** is tilted out of the axis (a rhombic dodecahedron,
    a truncated octahedron) is a ValueError. Beyond half the smallest width of the box in
    the plane the histogram is incomplete (the shells reach other images of the axis), and
    :meth:`run` warns once, as :class:`~mdakit_fastrdf.LateralRDF` does.

    Examples
    --------
    Water around the axis of a channel along z, through the centre of the protein in every
    frame, and the same with the density of the analysed cylinder as the reference::

        from mdakit_fastrdf import CylindricalRDF

        water = u.select_atoms("name OW")
        cyl = CylindricalRDF(water, nbins=60, range=(0.0, 15.0),
                             refgroup=u.select_atoms("protein")).run()
        cyl.results.bins, cyl.results.rdf, cyl.results.coordination
        pore = CylindricalRDF(water, range=(0.0, 6.0), origin=(25.0, 25.0, 0.0),
                              density="cylinder").run()
    """

    coordinates = "wrapped"
    #: the densities of the blocks come from _normalise, not from the box volumes
    volume_densities = False
    #: what the running coordination number counts (the plot's second axis)
    _coordination_label = "atoms within r of the axis"
    outputs = OutputSpec(
        fields=histogram_fields("atoms in the bin summed over frames") + (
            Field("cdf", "atoms per frame", "atoms within the upper bin edge of the axis "
                  "per frame", blocks=True),
            Field("coordination", "atoms", "atoms within the upper bin edge of the axis "
                  "per frame", blocks=True),
            Field("n_pairs", "atoms", "<N>: atoms of the group per frame"),
            Field("area_cum", "Å^2", "summed cross-section of the box normal to the axis"),
            Field("length", "Å", "length L of the cylindrical shells along the axis"),
            Field("rho", "Å^-3", "reference number density of norm='rdf'", blocks=True),
        ),
        tables=(Table(fields=("rdf", "count_uint64", "cdf", "coordination")),),
    )
    command = Command(
        name="cylindrical",
        help="radial distribution of atoms around an axis (distances from the axis, "
             "cylindrical shells)",
        select="name P",
        demo=("GRO_MEMPROT", "XTC_MEMPROT"),
        options=(
            Option(("--axis",), "axis", {"choices": ("x", "y", "z"),
                                          "help": "direction of the axis (default: z)"}),
            Option(("--origin",), "origin", {"nargs": 3, "type": float,
                                              "metavar": ("X", "Y", "Z"),
                                              "help": "a point of the axis in Å (default: "
                                                      "the centre of the box)"},
                   convert=tuple),
            Option(("--refgroup",), "refgroup", {"metavar": "SELECTION",
                                                  "help": "the axis passes through the "
                                                          "centre of these atoms in every "
                                                          "frame"}),
            Option(("--center",), "center", {"choices": ("geometry", "mass"),
                                              "help": "centre of --refgroup (default: "
                                                      "geometry)"}),
            Option(("--unwrap",), "unwrap", {"action": "store_const", "const": True,
                                              "help": "make --refgroup whole along its "
                                                      "bonds before taking its centre"}),
            Option(("--density",), "density", {"choices": DENSITIES,
                                                "help": "reference density of g: box "
                                                        "(default) or cylinder (the "
                                                        "analysed shell)"}),
            Option(("--height",), "height", {"type": float, "metavar": "L",
                                              "help": "length of the cylinders in Å "
                                                      "(default: the box length along the "
                                                      "axis)"}),
            Option(("--nbins",), "nbins", {"type": int, "help": "bins (default: 75)"}),
            Option(("--range",), "range", {"nargs": 2, "type": float,
                                            "metavar": ("RMIN", "RMAX"),
                                            "help": "distance from the axis in Å "
                                                    "(default: 0 15)"},
                   convert=tuple),
            Option(("--norm",), "norm", {"choices": ("rdf", "density", "none"),
                                          "help": "normalisation (default: rdf)"}),
        ),
        summary=lambda a: a._summary(),
    )

    def __init__(self, atomgroup, nbins=75, range=(0.0, 15.0), norm="rdf", *, axis="z",
                 origin=None, refgroup=None, center="geometry", unwrap=False, density="box",
                 height=None, **kwargs):
        check_atomgroup(atomgroup, "atomgroup", updating=True)
        self._origin = _check_origin(origin)
        refgroup = _check_refgroup(refgroup, atomgroup)
        if self._origin is not None and refgroup is not None:
            raise ValueError("give the axis's point as origin=(x, y, z) or as the centre of "
                             "refgroup, not both")
        if not isinstance(density, str) or density not in DENSITIES:
            raise ValueError(f"density must be one of {DENSITIES}, got {density!r}")
        if height is not None:
            if isinstance(height, bool) or not isinstance(height, numbers.Real):
                raise TypeError(f"height must be a length in Å, got {height!r}")
            if not (np.isfinite(height) and height > 0):
                raise ValueError(f"height must be a positive, finite length in Å, got "
                                 f"{height!r}")
            height = float(height)
        plane = Plane(axis, keyword="axis", what="cylindrical RDF", line=True)
        self._init_pairs(atomgroup, atomgroup, nbins, range, norm, center=center,
                         unwrap=unwrap, kwargs=kwargs)
        #: the plane normal to the axis (:class:`~mdakit_fastrdf.analysis.plane.Plane`),
        #: the geometry the base histograms in
        self.geometry = plane
        if refgroup is None and (center != "geometry" or unwrap):
            raise ValueError(f"center={center!r} and unwrap={unwrap!r} choose the centre of "
                             "refgroup, and no refgroup is given")
        if refgroup is not None:
            if center == "mass":
                needs_attribute(refgroup, "refgroup", "masses", "center='mass' needs")
            if unwrap:
                needs_attribute(refgroup, "refgroup", "bonds",
                                 "unwrap=True needs to make the group whole along its bonds; "
                                 "add them (u.guess_TopologyAttrs(to_guess=['bonds'])) or, "
                                 "if the group is whole in the trajectory, pass unwrap=False")
        self._centres = None
        if refgroup is not None and not is_updating(refgroup):
            # (kept: the plan of its centre, bonds and masses, is built once)
            self._centres = CompoundCentres(refgroup, "group", center, unwrap, "refgroup")
            self._centres.prepare()  # a group not connected by its bonds: an error now
        self.atomgroup = atomgroup
        self.refgroup = refgroup
        self.axis = plane.given
        self.origin = None if self._origin is None else tuple(self._origin.tolist())
        self.density = density
        self.height = height
        self._n_rows = [1, len(atomgroup)]  # one axis site, the atoms

    # -- the rows of a frame: the axis site, then the atoms -----------------------------
    def _layout(self):
        n = len(self.g2)
        self._n_rows = [1, n]
        ix = np.zeros(n + 1, dtype=np.int64)  # row 0: the site (its position: _axis_point)
        ix[1:] = self.g2.ix
        return PairLayout(ix=ix, offsets=np.array([0, 1, n + 1], dtype=np.int64),
                          pairs=np.array([[0, 1]], dtype=np.int32), labels=None,
                          segments=((0, n + 1, 1, n),))

    def _frame_rows(self):
        return {**super()._frame_rows(), "frame_origin": (3,)}

    def _needs_box_volume(self):
        # g needs no box with density='cylinder'; what the box is needed for is checked in
        # _frame_box
        return False

    def _frame_box(self):
        norm = self.norm
        box = super()._frame_box()
        if box.kind == NO_BOX:
            if norm == "rdf" and self.density == "box":
                raise ValueError(
                    f"norm='rdf' with density='box' needs the box (the density of the group "
                    f"in it), but frame {self._ts.frame} has none: use density='cylinder' "
                    "(the density in the analysed cylinder), norm='density' with height=, or "
                    "norm='none'")
            if norm == "density" and self.height is None:
                raise ValueError(
                    f"norm='density' needs the length L of the cylinders, the box length "
                    f"along the axis, but frame {self._ts.frame} has no box: give height= "
                    "(Å), or use norm='rdf' with density='cylinder' or norm='none'")
        self._box_now = box
        self._point_now = self._axis_point()
        return box

    def _axis_point(self):
        """The point of the axis in the current frame (float64), stored in
        ``results.frame_origin``."""
        if self._origin is not None:
            point = self._origin
        elif self.refgroup is not None:
            if len(self.refgroup) == 0:
                raise ValueError(f"refgroup holds no atom in frame {self._ts.frame}: its "
                                 "centre, the point of the axis, is undefined")
            point = (self._centres() if self._centres is not None else compound_centres(
                self.refgroup, "group", self.center, self.unwrap, "refgroup"))[0]
            if not np.all(np.isfinite(point)):
                raise ValueError(f"the centre of refgroup in frame {self._ts.frame} is not "
                                 "finite (NaN or infinite coordinates, or masses summing to "
                                 "zero with center='mass')")
        else:
            box = self._box_now
            if box.kind == NO_BOX:
                raise ValueError(
                    f"the axis passes through the centre of the box (no origin and no "
                    f"refgroup given), but frame {self._ts.frame} has no box: give "
                    "origin=(x, y, z) or refgroup=")
            point = 0.5 * box.vectors32.astype(np.float64).sum(axis=0)
        self._store_frame("frame_origin", point)
        return point

    def _can_feed(self):
        # Row 0 is the axis point of the frame (_frame_box: refgroup's centre or the box
        # centre), which a reader does not compute: its workers read their own frames.
        # (Found on a 2-GPU node, the only place readers are planned by default.)
        return False

    def _take_positions(self, ix, out):
        super()._take_positions(ix[1:], out[1:])  # the atoms (rows 1:)
        out[0] = self._point_now
        return out

    # -- normalisation ----------------------------------------------------------------
    def _length(self):
        """:math:`L`: `height`, or the frames' mean box length along the axis (NaN
        without a box)."""
        if self.height is not None:
            return self.height
        return float(frame_sum(self.results.frame_plane)[3] / self.n_frames)

    def _shell_density(self, count):
        """Atoms per frame and Å² of cross-section within the analysed shell,
        :math:`\\sum_k n_k / (N_\\mathrm{frames}\\, \\pi (r_\\mathrm{max}^2 -
        r_\\mathrm{min}^2))`."""
        return float(np.sum(count)) / (self.n_frames
                                       * ring_areas(self.rdf_settings["range"])[0])

    def _normalised(self, count, n_pairs=1):
        if self.norm == "none":
            return count / self.n_frames
        shells = self.n_frames * ring_areas(self.results.edges)
        if self.norm == "density":
            return count / (shells * self._length())
        if self.density == "box":  # rings of the plane: n_k / (N_frames A_k <N> / <A>)
            return super()._normalised(count, n_pairs)
        sigma = self._shell_density(count)
        if sigma == 0:
            warnings.warn(
                f"no atom of the group lies within range={tuple(self.rdf_settings['range'])!r}"
                " of the axis in the analysed frames: with density='cylinder' the reference "
                "density is 0 and g is undefined (NaN)", UserWarning, stacklevel=2)
            return np.full(np.shape(count), np.nan)
        return count / (shells * sigma)

    def _normalise(self, res):
        super()._normalise(res)
        plane = np.asarray(res.frame_plane, dtype=np.float64)
        if len(plane) and np.all(np.isfinite(plane[:, 0])):
            res.area_cum = float(frame_sum(plane)[0])
        res.pop("rho", None)  # (InterRDF's densities of the groups)
        length = self._length()
        res.length = length
        if self.density == "box":
            area = res.get("area_cum", np.nan) / self.n_frames
            rho = self._group_sizes()[1] / (area * length)
        else:
            rho = self._shell_density(res.count) / length
        if np.isfinite(rho):
            res.rho = float(rho)

    def _output_parameters(self):
        return {
            "axis": self.axis, "origin": None if self.origin is None else list(self.origin),
            "refgroup_n_atoms": None if self.refgroup is None else len(self.refgroup),
            "center": self.center, "unwrap": self.unwrap, "density": self.density,
            "height": self.height, "n_atoms": len(self.atomgroup),
            # the first "group" is the one axis site: the coordination is the atoms
            # within r of it
            "n_atoms1": 1, "n_centres1": 1,
        }

    def _summary(self):
        """The command line's summary lines."""
        res = self.results
        mean = np.asarray(res.frame_origin, dtype=np.float64).mean(axis=0)
        where = ("the centre of --refgroup" if self.refgroup is not None
                 else "--origin" if self.origin is not None else "the centre of the box")
        point = f"{mean[0]:.4g} {mean[1]:.4g} {mean[2]:.4g}"
        lines = [("Axis", f"along {self.axis}, through {where} (mean point {point} Å)")]
        if "rho" in res:
            rho = f"ρ = {res.rho:.6g} Å⁻³ (density {self.density}, L = {res.length:.6g} Å)"
            lines.append(("Density", rho))
        lines.append(("Within rmax", f"{res.cdf[-1]:.6g} atoms per frame"))
        return lines
