r"""Debye scattering intensities of finite systems from per-species-pair distance histograms.

:class:`DebyeScattering` computes the orientationally averaged scattering intensity of a
finite system (a protein, a cluster, a nanoparticle: no periodic box) through Debye's
equation, from the pair-distance histograms of every species pair that the kernels
accumulate in one call per frame (CADISHI's use case, its first section: K. Reuter and
J. Köfinger, *Comput. Phys. Commun.* **236**, 274 (2019), doi:10.1016/j.cpc.2018.10.018).
It adds no kernel: it is a :class:`~mdakit_fastrdf.SpeciesRDF` whose counts are
transformed once, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..engine import MAX_BINS, NO_BOX, Box, prepare_box
from .checks import check_atomgroup
from .debye_binning import DSINC_MAX, binning_error_bound
from .declarations import Command, Curve, Field, Option, OutputSpec, PlotAxes, Table
from .docstrings import render_docs
from .scattering import _check_q, sinc_transform, species_elements, species_weights
from .species import SpeciesRDF, pair_labels, pair_suffixes

__all__ = ["DSINC_MAX", "DebyeScattering", "binning_error_bound"]

#: Units of the intensities for each kind of weights.
_UNITS = {"xray": "e^2 (electrons squared)", "neutron": "fm^2", "number": "1",
          "custom": "weight^2"}
_DEFAULT_Q = (0.01, 1.0, 100)


def _summary(d):
    """The command line's summary lines of a DebyeScattering run."""
    res = d.results
    first = f"{res.intensity[0]:.4g} at q = {res.q[0]:.3g} 1/Å"
    last = f"{res.intensity[-1]:.4g} at q = {res.q[-1]:.3g} 1/Å"
    rel = np.max(res.binning_error_relative)
    fwd = np.max(res.binning_error / res.binning_scale)
    binning = (f"error bound at most {rel:.2e} of I(q), {fwd:.2e} of the forward scattering "
               f"({len(res.bins)} bins)")
    return [("I(q)", f"{first}, {last}"), ("Binning", binning)]


def _q_grid(q_min, q_max, n):
    """``n`` q values from `q_min` to `q_max` (the command line's ``--q QMIN QMAX N``)."""
    if n != int(n) or n < 1:
        raise ValueError(f"--q: N must be a positive integer, got {n:g}")
    return np.linspace(q_min, q_max, int(n))


def _max_pair_distance(positions):
    """The largest distance between two of `positions` (the convex hull's vertices), or the
    diagonal of their bounding box where the hull is degenerate."""
    positions = np.asarray(positions, dtype=np.float64)
    if len(positions) < 2:
        return 0.0
    try:
        from scipy.spatial import ConvexHull
        from scipy.spatial.distance import pdist

        pts = positions[ConvexHull(positions).vertices] if len(positions) > 4 else positions
        return float(pdist(pts).max())
    except Exception:  # noqa: BLE001 - qhull fails on flat or collinear sets
        return float(np.linalg.norm(positions.max(axis=0) - positions.min(axis=0)))


@render_docs
class DebyeScattering(SpeciesRDF):
    r"""Debye scattering intensity :math:`I(q)` of a finite system, from the pair-distance
    histograms of every species pair.

    The atoms of `atomgroup` are split into species (``by``, as in
    :class:`~mdakit_fastrdf.SpeciesRDF`); each frame, one kernel call histograms the
    distances of every pair of atoms (no periodic boundaries) per species pair, and at the end
    Debye's equation turns the histograms, averaged over the frames, into the intensity on the
    grid `q`, with the weights (X-ray form factors, neutron scattering lengths, ...) of
    :func:`~mdakit_fastrdf.analysis.scattering.species_weights`.

    Parameters
    ----------
    atomgroup : AtomGroup
        The atoms of the finite system (e.g. a protein, made whole).
    q : array_like, optional
        Scattering vector magnitudes :math:`q = 4\pi\sin\theta/\lambda` in Å⁻¹, all
        positive (default: 100 values from 0.01 to 1 Å⁻¹).
    by : str, mapping, callable or list of AtomGroup, optional
        How to form species (see :class:`~mdakit_fastrdf.SpeciesRDF`; default
        ``'element'``). The species must not overlap.
    weights : {'xray', 'neutron', 'number'} or mapping, optional
        The scattering weight of each species (default ``'xray'``, the atomic form factors;
        see :func:`~mdakit_fastrdf.analysis.scattering.species_weights`). X-ray and neutron
        weights need the element of every atom (the topology's ``elements``).
    nbins : int, optional
        Keyword only. Number of bins over `range` (default: from the bin width).
    bin_width : float, optional
        Keyword only. Bin width in Å instead of `nbins` (the range is extended to a whole
        number of bins). Default: :math:`\Delta = 2\epsilon / (D\, q_\mathrm{max})` with
        :math:`\epsilon` = `tolerance` (see Notes).
    range : tuple of float, optional
        Keyword only. ``(0, rmax)`` in Å; every pair distance of every frame must be below
        ``rmax`` (a run that finds a pair beyond it is a ValueError). Default: 1.25 times the
        largest pair distance of the current frame plus 2 Å.
    tolerance : float, optional
        Keyword only. The bound on the binning error, relative to :math:`(\sum_i |w_i(q)|)^2`,
        that the default bin width guarantees up to :math:`q_\mathrm{max}` (default
        :math:`10^{-3}`).
    ignore_box : bool, optional
        Keyword only. A trajectory with a periodic box is refused (Debye's equation is for
        finite systems; the distances would not be minimum images). ``True`` takes the
        positions as they are and ignores the box: the system must then be whole (e.g. made
        whole with MDAnalysis's ``unwrap`` transformation).
    device, precision, n_threads, method :
        Keyword only. As :class:`~mdakit_fastrdf.SpeciesRDF` (``precision='double'`` by
        default: the distances of float32 positions computed in float64, binned as
        :func:`numpy.histogram`).
    verbose : bool, optional
        Show detailed progress of the calculation if set to ``True``.

    Attributes
    ----------
    results.q : numpy.ndarray
        ``(n_q,)`` Å⁻¹.
    results.intensity : numpy.ndarray
        ``(n_q,)`` :math:`I(q)` per frame, in the square of the weights' unit (e² for X-rays,
        fm² for neutrons).
    results.partials : numpy.ndarray
        ``(n_pairs, n_q)`` the contribution of each species pair (their sum is the
        intensity; see Notes).
    results.pair_sums : numpy.ndarray
        ``(n_pairs, n_q)`` :math:`S_{ab}(q) = \sum_k h_{ab,k}\,\mathrm{sinc}(q r_k)`: the
        unweighted Debye sums of the distinct pairs (to weigh again without a new run).
    results.weights : numpy.ndarray
        ``(n_species, n_q)`` the weights :math:`w_a(q)` used.
    results.species, results.n_atoms, results.pairs, results.pair_labels :
        Species labels (largest species first), atoms per species, ``(n_pairs, 2)`` species
        indices :math:`a \le b` and their labels.
    results.edges, results.bins, results.count, results.count_uint64 :
        The histograms (summed over frames; intra-species ones count every ordered pair and
        the :math:`N_a` self pairs at distance 0, as :class:`~mdakit_fastrdf.SpeciesRDF`).
    results.binning_error : numpy.ndarray
        ``(n_q,)`` a bound on :math:`|I_\mathrm{hist}(q) - I(q)|`, the error of placing the
        pairs at bin centres (:func:`binning_error_bound`), computed from the histograms.
    results.binning_error_relative : numpy.ndarray
        ``binning_error / |intensity|``.
    results.binning_scale : numpy.ndarray
        ``(n_q,)`` :math:`(\sum_i |w_i(q)|)^2`, the scale of `tolerance`.

    With ``run(blocks=B)``: ``block_intensity``, ``intensity_sem``, ``block_partials`` and
    ``partials_sem`` (standard errors of the mean over blocks of frames).

    Notes
    -----
    Debye's equation for :math:`N` atoms with weights :math:`w_i(q)` at distances
    :math:`r_{ij}`, averaged over the frames, with species :math:`a` of :math:`N_a` atoms:

    .. math::

        I(q) = \Bigl\langle \sum_{i,j} w_i w_j \frac{\sin q r_{ij}}{q r_{ij}} \Bigr\rangle
        = \sum_a N_a w_a^2 + \sum_a w_a^2 S_{aa}(q) + 2 \sum_{a<b} w_a w_b S_{ab}(q),

    .. math::

        S_{ab}(q) = \sum_k h_{ab,k} \frac{\sin q r_k}{q r_k},

    where :math:`h_{ab,k}` is the number of pairs per frame in bin :math:`k` (centre
    :math:`r_k`): for :math:`a < b` every unordered pair :math:`i \in a, j \in b` once; for
    :math:`a = b` every ordered pair :math:`i \ne j` (both :math:`(i, j)` and :math:`(j,
    i)`, as the kernel counts them), after removing the :math:`N_a` self pairs per frame that
    the kernel puts in the first bin (they are the exact term :math:`N_a w_a^2`).
    ``results.partials`` holds :math:`N_a w_a^2 + w_a^2 S_{aa}` for :math:`a = b` and
    :math:`2 w_a w_b S_{ab}` for :math:`a < b`.

    *Bin width.* Each pair is placed at its bin centre, within :math:`h = \Delta/2` of its
    distance (plus the float32 error of the distance with ``precision='single'``).
    :func:`binning_error_bound` bounds the error this makes, for any distances within the
    bins, by :math:`B(q) \le D\, q h \sum_{i \ne j} |w_i w_j| \le D\, q h\, (\sum_i
    |w_i|)^2`, :math:`D = \max|\mathrm{sinc}'| = 0.43618`. The default bin width
    :math:`\Delta = 2\epsilon/(D\, q_\mathrm{max})` therefore keeps the bound below
    :math:`\epsilon\,(\sum_i |w_i(q)|)^2` (``tolerance`` times the forward scattering of
    like-signed weights) at every :math:`q \le q_\mathrm{max}`; ``results.binning_error`` is
    the tighter bound computed from the histograms. It is a worst case (every pair at a bin
    edge); for smooth distance distributions the error is of second order in
    :math:`q\Delta` and much smaller. Where :math:`I(q)` falls far below the forward
    scattering (large :math:`q`, a large system) the bound relative to :math:`I(q)`
    (``binning_error_relative``) can exceed the tolerance: choose a smaller ``bin_width``
    when it matters. A bin width with :math:`q_\mathrm{max}\Delta > \pi` cannot resolve
    :math:`q_\mathrm{max}` and is a ValueError.

    Examples
    --------
    ${ADK_VACUUM}
    >>> from mdakit_fastrdf import DebyeScattering
    >>> u.guess_TopologyAttrs(to_guess=["elements"])
    >>> saxs = DebyeScattering(u.atoms, q=[0.05, 0.1, 0.2]).run(stop=2)
    >>> saxs.results.intensity.shape, saxs.results.species
    ((3,), ['H', 'C', 'O', 'N', 'S'])
    """

    coordinates = "as_is"
    outputs = OutputSpec(
        fields=(
            Field("bins", "Å", "bin centre"),
            Field("edges", "Å", "bin edges"),
            Field("count", "pairs summed over frames", "pairs in the bin summed over frames"),
            Field("count_uint64", "pairs summed over frames",
                  "pairs in the bin summed over frames (exact; intra-species: ordered pairs "
                  "and the self pairs in the first bin)", column="count", integer=True),
            Field("q", "Å^-1", "scattering vector magnitude 4 pi sin(theta)/lambda"),
            Field("intensity", "square of the weights' unit",
                  "Debye scattering intensity per frame", blocks=True),
            Field("partials", "square of the weights' unit",
                  "contribution of each species pair to the intensity", blocks=True),
            Field("pair_sums", "pairs per frame",
                  "unweighted Debye sums of the distinct pairs of each species pair"),
            Field("weights", "weight", "scattering weight of each species"),
            Field("binning_error", "square of the weights' unit",
                  "bound on the error of placing pairs at bin centres"),
            Field("binning_error_relative", "", "binning_error / |intensity|"),
            Field("binning_scale", "square of the weights' unit",
                  "(sum of |weights| over the atoms)^2, the scale of the tolerance"),
        ),
        tables=(Table(fields=("count_uint64",), labels=lambda res: pair_labels(res)),
                Table(fields=("intensity", "binning_error"), axis="q"),
                Table(fields=("partials", "pair_sums"), axis="q",
                      labels=lambda res: pair_labels(res),
                      wide=lambda res: pair_suffixes(res))),
        csv_files={"bins": "histogram"},  # debye.csv over q, debye_histogram.csv over r
    )
    command = Command(
        name="debye",
        help="Debye scattering intensity I(q) of a finite system (no periodic box)",
        select="all",
        demo=("PSF", "DCD"),
        guess_elements=True,
        options=(
            Option(("--q",), "q", {"nargs": 3, "type": float,
                                    "metavar": ("QMIN", "QMAX", "N"),
                                    "help": "N q values from QMIN to QMAX in 1/Å "
                                            "(default: 100 from 0.01 to 1)"},
                   convert=lambda v: _q_grid(*v)),
            Option(("--by",), "by", {"help": "species: element (default), name, type, ..."}),
            Option(("--weights",), "weights", {"choices": ("xray", "neutron", "number"),
                                                "help": "scattering weights (default: xray)"}),
            Option(("--bin-width",), "bin_width", {"type": float, "metavar": "Å",
                                                    "help": "histogram bin width (default: "
                                                            "from --tolerance and QMAX)"}),
            Option(("--tolerance",), "tolerance", {"type": float,
                                                    "help": "binning error bound relative to "
                                                            "the forward scattering "
                                                            "(default: 1e-3)"}),
            Option(("--ignore-box",), "ignore_box", {"action": "store_const", "const": True,
                                                      "help": "analyse a trajectory that has "
                                                              "a box as a finite system"}),
        ),
        summary=lambda d: _summary(d),
    )

    def __init__(self, atomgroup, q=None, by="element", weights="xray", *, nbins=None,
                 bin_width=None, range=None, tolerance=1e-3, ignore_box=False, **kwargs):
        check_atomgroup(atomgroup, "atomgroup")
        if not isinstance(ignore_box, (bool, np.bool_)):
            raise TypeError(f"ignore_box must be True or False, got {ignore_box!r}")
        self.ignore_box = bool(ignore_box)
        self._check_box(atomgroup.universe.trajectory.ts)
        q = np.linspace(*_DEFAULT_Q) if q is None else q
        q = np.atleast_1d(_check_q(q))
        if len(q) == 0 or np.any(q <= 0):
            raise ValueError(
                f"q must hold positive values in Å⁻¹ (q = 4π sinθ/λ > 0), got "
                f"{q[q <= 0][:5] if len(q) else 'no value'}")
        self.q = q.copy()
        q_max = float(q.max())
        tolerance = float(tolerance)
        if not (np.isfinite(tolerance) and 0 < tolerance < 1):
            raise ValueError(f"tolerance must lie between 0 and 1, got {tolerance!r}")
        self.tolerance = tolerance

        # -- the bins ---------------------------------------------------------------------
        if range is None:
            rmax = 1.25 * _max_pair_distance(atomgroup.positions) + 2.0
        else:
            try:
                rmin, rmax = (float(v) for v in range)
            except (TypeError, ValueError):
                raise ValueError(f"range must be (0, rmax) in Å, got {range!r}") from None
            if rmin != 0.0:
                raise ValueError(
                    f"range must start at 0 Å: Debye's equation sums every pair, got "
                    f"{range!r}; use range=(0, rmax)")
            if not (np.isfinite(rmax) and rmax > 0):
                raise ValueError(f"range: rmax must be positive and finite, got {range!r}")
        if nbins is not None and bin_width is not None:
            raise ValueError("give nbins or bin_width, not both")
        if bin_width is None and nbins is None:
            bin_width = 2.0 * tolerance / (DSINC_MAX * q_max) * (1 - 1e-6)
        if bin_width is not None:
            bin_width = float(bin_width)
            if not (np.isfinite(bin_width) and bin_width > 0):
                raise ValueError(f"bin_width must be positive in Å, got {bin_width!r}")
            n = int(np.ceil(rmax / bin_width - 1e-9))
            if n > MAX_BINS:
                raise ValueError(
                    f"{n:,} bins of {bin_width:.3g} Å up to {rmax:.4g} Å are more than the "
                    f"{MAX_BINS:,} the kernels take: lower q_max ({q_max:g} Å⁻¹), raise the "
                    f"tolerance or bin_width, or give a smaller range")
            nbins, rmax = n, n * bin_width
        width = rmax / nbins if isinstance(nbins, (int, np.integer)) else None
        if width is not None and q_max * width > np.pi:
            raise ValueError(
                f"q_max = {q_max:g} Å⁻¹ is beyond what bins of {width:.4g} Å resolve "
                f"(q_max · Δr must stay below π, and below 2·tolerance/{DSINC_MAX} = "
                f"{2 * tolerance / DSINC_MAX:.3g} for the tolerance): use more bins, a smaller "
                f"bin_width, or q <= {np.pi / width:.4g}")

        super().__init__(atomgroup, by=by, nbins=nbins, range=(0.0, rmax), norm="none",
                         **kwargs)
        if not self._disjoint:
            raise ValueError("by: the species overlap; Debye's equation needs every atom in "
                             "exactly one species")

        # -- the weights (every error now, not after the run) --------------------------------
        if isinstance(weights, Mapping):
            self.weights_kind = "custom"
            self._weight_values = {str(k): ("callable" if callable(v) else v)
                                   for k, v in weights.items()}
            elements = None
        elif isinstance(weights, str) and weights.lower() in ("xray", "neutron"):
            self.weights_kind = weights.lower()
            self._weight_values = None
            elements = species_elements(self.groups, self.species)
        else:
            self.weights_kind = str(weights).lower() if isinstance(weights, str) else weights
            self._weight_values = None
            elements = None
        self._w = species_weights(self.species, self.q, weights, elements)
        self.elements = elements
        # the largest error of a distance: none in double (float64 arithmetic of float32
        # positions, numpy's bins); a few float32 roundings of the positions' scale in single
        extent = float(np.abs(atomgroup.positions).max()) if len(atomgroup) else 0.0
        self._distance_error = (0.0 if self.precision == "double"
                                else 16 * np.finfo(np.float32).eps * (2 * extent + rmax))

    # -- checks -------------------------------------------------------------------------
    def _check_box(self, ts):
        if self.ignore_box:
            return
        if prepare_box(ts.dimensions).kind != NO_BOX:
            raise ValueError(
                f"DebyeScattering is for finite systems, but frame {ts.frame} has a periodic "
                f"box (dimensions={ts.dimensions}): pair distances would not be minimum "
                f"images. Pass ignore_box=True to use the positions as they are (make the "
                f"system whole first, e.g. with transformations.unwrap), or compute the "
                f"structure factor of the periodic system instead")

    def _frame_box(self) -> Box:
        super()._frame_box()  # checks the box, counts the frame in its block
        self._check_box(self._ts)
        return Box(NO_BOX)

    def _half_width_message(self):
        # distances are taken as the positions are, never as minimum images: a box (with
        # ignore_box=True) limits nothing, so there is no half-width to pass
        return None

    # -- results ------------------------------------------------------------------------
    def _normalise(self, res):
        self._species_results(res)
        res.q = self.q.copy()
        res.weights = self._w.copy()
        n_frames = int(self.n_frames)
        a, b = self._pairs[:, 0], self._pairs[:, 1]
        intra = a == b
        n_atoms = res.n_atoms.astype(np.int64)
        # every pair of every frame must be in the histograms
        per_frame = np.where(intra, n_atoms[a] ** 2, n_atoms[a] * n_atoms[b])
        counted = res.count_uint64.sum(axis=1, dtype=np.uint64).astype(np.int64)
        missing = per_frame * n_frames - counted
        if np.any(missing != 0):
            lost = int(missing.sum())
            raise ValueError(
                f"{lost:,} atom pairs of the {n_frames} frame(s) lay at or beyond range[1] = "
                f"{self.rdf_settings['range'][1]:.4g} Å and are not in the histograms, so "
                f"the intensity would miss them: run again with a larger range=(0, rmax) (the "
                f"default takes 1.25 times the largest pair distance of the first frame)")
        distinct = res.count_uint64.astype(np.int64)
        distinct[intra, 0] -= n_atoms[a[intra]] * n_frames
        h = distinct.astype(np.float64) / n_frames
        res.pair_sums = sinc_transform(h, res.bins, self.q)
        w = self._w
        mult = np.where(intra, 1.0, 2.0)[:, None]
        pair_w = mult * w[a] * w[b]
        res.partials = pair_w * res.pair_sums + np.where(
            intra, n_atoms[a], 0)[:, None] * w[a] ** 2
        res.intensity = res.partials.sum(axis=0)
        half = 0.5 * (res.edges[1] - res.edges[0]) + self._distance_error
        res.binning_error = binning_error_bound(h, res.bins, half, self.q, pair_w)
        with np.errstate(divide="ignore", invalid="ignore"):
            res.binning_error_relative = res.binning_error / np.abs(res.intensity)
        res.binning_scale = (n_atoms @ np.abs(w)) ** 2

    def _output_parameters(self):
        from .parameters import jsonable

        return {**super()._output_parameters(), "weights": self.weights_kind,
                "weight_values": jsonable(self._weight_values),
                "elements": jsonable(self.elements), "tolerance": self.tolerance,
                "ignore_box": self.ignore_box,
                "units": _UNITS.get(self.weights_kind, "weight^2")}

    @classmethod
    def _plot_axes(cls, results, parameters):
        """I(q) over q on a log axis."""
        units = parameters.get("units", "")
        # the axis label in mathtext: e^2 (electrons squared) -> e$^2$, fm^2 -> fm$^2$
        units = units.split(" (")[0].replace("^2", "$^2$")
        return PlotAxes(x=np.asarray(results.q), xlabel="q (Å$^{-1}$)",
                        ylabel=f"I(q) ({units})" if units and units != "1" else "I(q)",
                        yscale="log")

    @classmethod
    def _curves(cls, results, parameters, *, partials=False):
        """The intensity (with its standard error after a run with blocks) and, with
        `partials`, the absolute contribution of each species pair."""
        curves = [Curve("I(q)", np.asarray(results.intensity), results.get("intensity_sem"),
                        color="black")]
        if partials:
            species = list(results.species)
            for k, (ia, ib) in enumerate(np.asarray(results.pairs)):
                curves.append(Curve(f"|{species[ia]}–{species[ib]}|",
                                    np.abs(np.asarray(results.partials[k]))))
        return curves

    _partial_needs = "intensity"

    @staticmethod
    def _partial_fields(results, k, ia):
        return {"partial": results.partials[k], "pair_sum": results.pair_sums[k]}

    def partial(self, a, b):
        """The species pair `a`, `b` (either order): ``count``, ``count_uint64``,
        ``partial`` (its contribution to the intensity), ``pair_sum`` and ``index``."""
        return super().partial(a, b)

