r"""Static structure factors :math:`S(q)` of periodic systems from the partial pair-distance
histograms, joined at small :math:`q` to a direct sum over the reciprocal lattice.

:class:`StructureFactor` is a :class:`~mdakit_fastrdf.SpeciesRDF` (one kernel call per
frame histograms every species pair) that transforms the partial histograms into
Faber–Ziman partial structure factors, weights them into the total X-ray, neutron or
number :math:`S(q)` and :math:`F(q)`, and below a crossover :math:`q_c`, where the
transform of a truncated :math:`g(r)` is not accurate, takes :math:`S(q)` from the
amplitudes :math:`A_a(\mathbf k) = \sum_{j \in a} e^{i\mathbf k\cdot\mathbf r_j}` of the
reciprocal vectors of the box, computed per frame by the compiled k-space engine
(:mod:`mdakit_fastrdf.engine.kspace`). The documentation page "Structure factors" states
the conventions and the remaining differences.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..engine import NO_BOX, prepare_box
from .blocks import frame_sum
from .declarations import Curve, Field, Table
from .docstrings import render_docs
from .histograms import shell_volumes
from .kspace_frames import KSpaceFrames
from .scattering import sinc_transform, species_elements, species_weights
from .species import SpeciesRDF, pair_index, pair_labels, pair_suffixes, species_index
from .structure_factor_command import SQ_COMMAND
from .structure_factor_theory import (
    _check_taper_width,
    bhatia_thornton,
    cosine_window,
    faber_ziman_total,
    lorch_window,
)

__all__ = ["StructureFactor", "bhatia_thornton", "cosine_window", "faber_ziman_total",
           "lorch_window"]

#: Windows of the transform.
WINDOWS = ("cosine", "lorch", "none")


def _no_box_message(where):
    return (f"StructureFactor needs a periodic box, but {where} has none: its S(q) is a "
            "property of a periodic system (number density, reciprocal lattice). For a "
            "finite system (a protein, a cluster, a nanoparticle) compute the Debye "
            "scattering intensity I(q) instead (DebyeScattering), or set the box (e.g. with "
            "a transformation).")


def _check_q_range(q_range, qbins):
    if isinstance(qbins, bool) or not isinstance(qbins, numbers.Integral) or qbins < 1:
        raise ValueError(f"qbins must be a positive integer (the number of q bins), got "
                         f"{qbins!r}")
    try:
        lo, hi = (float(v) for v in q_range)
    except (TypeError, ValueError):
        raise TypeError(f"q_range must be (q_min, q_max) in Å⁻¹, got {q_range!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"q_range must be finite, got {q_range!r}")
    if lo < 0 or hi <= 0:
        raise ValueError(
            f"q_range={q_range!r}: q must be positive (q = 4π sinθ/λ in Å⁻¹); use "
            f"q_range=(q_min, q_max) with 0 <= q_min < q_max")
    if hi <= lo:
        raise ValueError(f"q_range={q_range!r}: q_max must be larger than q_min")
    return lo, hi


@render_docs
class StructureFactor(KSpaceFrames, SpeciesRDF):
    r"""Partial and total static structure factors :math:`S(q)` of a periodic system.

    A :class:`~mdakit_fastrdf.SpeciesRDF` (one kernel call per frame for every species
    pair, every device and parallel backend, ``blocks``) whose partial histograms are
    transformed into Faber–Ziman partial structure factors; below the crossover
    :math:`q_c` the partials come from a direct sum over the reciprocal vectors of the box
    instead (see Notes). Self pairs are never counted (``exclude_self``) and ``norm`` is
    ``'rdf'``.

    Parameters
    ----------
    atomgroup : AtomGroup
        The atoms (a periodic system).
    by : str, mapping, callable or list of AtomGroup, optional
        How to form species (see :class:`~mdakit_fastrdf.SpeciesRDF`); they must not
        overlap. X-ray and neutron weights need one element per species (``'element'``,
        the default, gives that).
    nbins : int, optional
        Bins of the pair histograms over `range` (default 1500: 0.01 Å bins over 15 Å).
        The transform is exact for the pairs it counts up to the bin width: its
        quadrature puts every pair at its bin centre (see Notes for the largest q).
    range : tuple of float, optional
        ``(0, r_max)`` in Å. It must start at 0 and :math:`r_\mathrm{max}` must not exceed
        half the smallest perpendicular width of the box of any frame.
    qbins : int, optional
        Keyword only. Number of q bins (default 200).
    q_range : tuple of float, optional
        Keyword only. ``(q_min, q_max)`` in Å⁻¹ (:math:`q = 4\pi\sin\theta/\lambda`);
        ``results.q`` are the centres of `qbins` equal bins over it (default ``(0, 10)``).
        :math:`q_\mathrm{max}` may not exceed :math:`\pi/\Delta r` (Notes).
    weights : {'number', 'xray', 'neutron'} or mapping, optional
        Keyword only. The weights :math:`f_a(q)` of the total :math:`S(q)`: ``'number'``
        (default, 1 per atom: the number–number structure factor), ``'xray'`` (atomic
        form factors, Waasmaier–Kirfel through ``periodictable``), ``'neutron'`` (coherent
        scattering lengths), or ``{species: number or callable of q}`` (see
        :func:`~mdakit_fastrdf.analysis.scattering.species_weights`).
    window : {'cosine', 'lorch', 'none'} or None, optional
        Keyword only. The window :math:`W(r)` of the transform (Notes): ``'cosine'``
        (default: flat, then half a cosine over the last `taper_width` of the range,
        :func:`cosine_window`), ``'lorch'`` (Lorch's over the whole range,
        :func:`lorch_window`) or none (``None`` or
        ``'none'``: the plain truncated transform).
    taper_width : float, optional
        Keyword only. With ``window='cosine'``, the width :math:`w` of the taper over
        :math:`[r_\mathrm{max} - w, r_\mathrm{max}]` in Å, :math:`0 < w \le
        r_\mathrm{max}` (default :math:`r_\mathrm{max}/2`). Other windows take none.
    q_crossover : float, 'auto' or None, optional
        Keyword only. :math:`q_c` in Å⁻¹: q bins whose centre lies below it take the direct
        k-space sum; ``'auto'`` (default) is :math:`q_c = 5\pi / r_\mathrm{max}` (Notes);
        ``None`` uses the transform everywhere (no k-space sum).
    device, precision, n_threads, method :
        Keyword only. As :class:`~mdakit_fastrdf.SpeciesRDF`. The k-space sums run on
        the GPU only when `device` names it (``'cuda'``, ``'cuda:N'``); with ``'auto'``
        they run on the CPU (the histograms on whichever device is there). Their
        floating-point sums are deterministic on each device but differ between the CPU
        and the GPU in the last bits (within ``GPU_TOLERANCE`` of
        :mod:`mdakit_fastrdf.engine.kspace`), so ``'auto'`` keeps every worker of every
        backend on the same arithmetic: the same bits whatever the machine gives each
        worker. The histograms are identical integers on every device.

    Attributes
    ----------
    results.q, results.q_edges : numpy.ndarray
        q bin centres and edges, Å⁻¹.
    results.partials : numpy.ndarray
        ``(n_pairs, n_q)`` Faber–Ziman :math:`S_{ab}(q)` of ``results.pairs`` (the k-space
        sum below ``q_crossover``, the transform above).
    results.partials_transform, results.partials_direct : numpy.ndarray
        The two routes on the whole grid (``partials_direct`` is NaN at and above the
        crossover and where a bin holds no reciprocal vector).
    results.s : numpy.ndarray
        ``(n_q,)`` total Faber–Ziman :math:`S(q)` with the chosen weights;
        ``results.s_transform`` and ``results.s_direct`` from each route alone.
    results.f : numpy.ndarray
        ``(n_q,)`` total scattering function :math:`F(q)` (units of the weights squared:
        electrons², fm² or 1).
    results.form_factors : numpy.ndarray
        ``(n_species, n_q)`` :math:`f_a(q)` used.
    results.mean_f_sq, results.mean_sq_f : numpy.ndarray
        :math:`\langle f\rangle^2` (the normalisation of ``s``) and
        :math:`\langle f^2\rangle` (for the other convention, ``1 + f / mean_sq_f``).
    results.concentrations : numpy.ndarray
        :math:`c_a = N_a/N`.
    results.density : float
        :math:`\rho = N/\langle V\rangle`, Å⁻³.
    results.q_crossover : float or None
        :math:`q_c` used.
    results.n_kvectors : numpy.ndarray
        ``(n_q,)`` reciprocal vectors (half space) per frame averaged in each direct bin.
    results.s_nn, results.s_nc, results.s_cc : numpy.ndarray
        Bhatia–Thornton partials (two species only; species 1 is ``results.species[0]``).

    With ``run(blocks=B)`` ``partials``, ``s``, ``f`` and the Bhatia–Thornton partials
    also get ``block_<name>`` and ``<name>_sem``. The per-frame k-space sums are kept in
    ``results.frame_kspace_sum`` (``(n_frames, n_pairs, n_q)``, sums over the vectors of
    each bin of :math:`\mathrm{Re}\,A_a A_b^*`), ``results.frame_kspace_count`` and
    ``results.frame_volume``.

    Notes
    -----
    *Faber–Ziman partials.* With :math:`N` atoms, :math:`N_a` of species :math:`a`,
    :math:`c_a = N_a/N`, :math:`\rho = N/\langle V\rangle` the total number density and
    :math:`g_{ab}` the partial RDF of distinct atoms (normalised by the
    :math:`N^{ab}_\mathrm{pairs}` pairs of the closed system: :math:`N_a N_b`, or
    :math:`N_a(N_a - 1)` for :math:`a = b`),

    .. math::

        S_{ab}(q) = 1 + 4\pi\rho\,\frac{N^{ab}_\mathrm{pairs}}{N_a N_b}
        \int_0^{r_\mathrm{max}} r^2 \bigl(g_{ab}(r) - 1\bigr)
        \frac{\sin qr}{qr}\, W(r)\, dr,

    i.e. Faber and Ziman's :math:`1 + 4\pi\rho\int r^2 (g_{ab} - 1)\operatorname{sinc}\,
    dr` with the closed system's pair count (the factor is :math:`1 - \delta_{ab}/N_a`,
    which makes the transform and the direct sum below the same function of the pairs).
    With the pair counts :math:`n_{ab,k}` of bin :math:`k` (centre :math:`r_k`, shell
    volume :math:`V_k`) summed over :math:`N_f` frames, the integral is taken as

    .. math::

        S_{ab}(q) - 1 = \frac{N}{N_a N_b} \sum_k \Bigl(\frac{n_{ab,k}}{N_f} -
        \frac{N^{ab}_\mathrm{pairs} V_k}{\langle V\rangle}\Bigr)
        W(r_k)\, \frac{\sin q r_k}{q r_k}.

    *The largest q.* The sum samples :math:`r(g - 1)` at the bin centres
    :math:`r_k = (k + \tfrac12)\Delta r`; since :math:`\sin((2\pi/\Delta r - q) r_k) =
    \sin(q r_k)`, the transform at :math:`q` and at :math:`2\pi/\Delta r - q` are the same
    samples: above :math:`q = \pi/\Delta r` it only mirrors lower q. ``q_max`` beyond
    :math:`\pi/\Delta r` is a ValueError (use more bins). Below it the midpoint rule's
    relative error for a pair is about :math:`(q\Delta r)^2/24`.

    *Window.* A window damps the truncation ripples (period :math:`2\pi/r_\mathrm{max}`)
    and broadens the peaks: the transform is the true :math:`S(q)` convolved with the
    transform of :math:`W`. The default cosine window,

    .. math::

        W(r) = 1 \quad (r \le r_\mathrm{max} - w), \qquad
        W(r) = \tfrac12\bigl[1 + \cos\bigl(\pi (r - r_\mathrm{max} + w)/w\bigr)\bigr]
        \quad (r_\mathrm{max} - w < r \le r_\mathrm{max}),

    with :math:`w = r_\mathrm{max}/2`, keeps the first half of :math:`g(r)` whole and
    goes to zero smoothly (zero slope at :math:`r_\mathrm{max}`), so its kernel is
    narrower than Lorch's :math:`W(r) = \sin(\pi r/r_\mathrm{max})/(\pi
    r/r_\mathrm{max})`, which weights every distance below 1 and broadens the peaks by
    about :math:`2\pi/r_\mathrm{max}`. On the water of the adk system (10 frames, against
    the direct sum over every reciprocal vector) the cosine window put the main peak within
    0.4–0.7 % at :math:`r_\mathrm{max}` = 12–28 Å where Lorch's was 1.1–3.6 % low, with
    smaller ripples above :math:`q_c` (the documentation page "Structure factors" gives the
    numbers).

    *Small q: the direct sum.* For a reciprocal vector :math:`\mathbf k \ne 0` of the box,
    with :math:`A_a(\mathbf k) = \sum_{j\in a} e^{i\mathbf k\cdot\mathbf r_j}`, the
    Ashcroft–Langreth partial is :math:`S^{AL}_{ab}(\mathbf k) = \mathrm{Re}\,\langle A_a
    A_b^*\rangle / \sqrt{N_a N_b}` and the Faber–Ziman one
    :math:`S_{ab} = 1 + (S^{AL}_{ab} - \delta_{ab})/\sqrt{c_a c_b}`:

    .. math::

        S_{ab}(\mathbf k) = 1 + \frac{N}{N_a N_b}\Bigl(\mathrm{Re}\,\langle A_a(\mathbf k)
        A_b(\mathbf k)^*\rangle - \delta_{ab} N_a\Bigr)
        = 1 + \frac{N}{N_a N_b} \Bigl\langle \sum_{i\in a, j \in b, i\ne j}
        \cos \mathbf k\cdot\mathbf r_{ij} \Bigr\rangle,

    the transform's expression without the truncation at :math:`r_\mathrm{max}` (the
    uniform term integrates to zero over the cell). Each q bin below :math:`q_c` averages
    it over every reciprocal vector :math:`\mathbf k = 2\pi(n_1\mathbf a^* + n_2\mathbf b^*
    + n_3\mathbf c^*)` of the bin (one of :math:`\pm\mathbf k`, which give the same value)
    and every frame. Bins below :math:`2\pi/L` hold no vector and are NaN. The cost is
    :math:`O(N M)` per frame for the :math:`M \approx V q_c^3 / (12\pi^2)` vectors.

    *Total.* :math:`F(q) = \sum_{a,b} c_a c_b f_a f_b (S_{ab} - 1)`,
    :math:`S(q) = 1 + F(q)/\langle f\rangle^2` (Faber–Ziman; :func:`faber_ziman_total`),
    with :math:`f_a(q)` at the bin centre. :math:`\langle f^2\rangle` normalisation
    (``1 + f / mean_sq_f``) is the other convention in use; the two agree for one species.

    Examples
    --------
    ${ADK_WATER}
    >>> from mdakit_fastrdf import StructureFactor
    >>> ow = u.select_atoms("name OW")
    >>> sf = StructureFactor(ow, range=(0.0, 12.0), nbins=1200, q_range=(0.0, 6.0),
    ...                      qbins=60, q_crossover=None).run(stop=2)
    >>> sf.results.s.shape, round(float(sf.results.q[28]), 2)
    ((60,), 2.85)

    X-ray weights and the direct sum below the crossover, with standard errors::

        sf = StructureFactor(u.select_atoms("resname SOL"), weights="xray",
                             range=(0, 12), q_range=(0, 8), qbins=160).run(blocks=5)
        sf.results.s, sf.results.s_sem, sf.results.partials
    """

    #: beyond half the smallest box width is an error (boxes.BoxStatistics)
    half_width_reason = "the transform would be wrong"

    coordinates = "wrapped"
    _result_arrays = 4
    outputs = SpeciesRDF.outputs.extend(fields=(
        Field("q", "Å^-1", "q bin centre"),
        Field("q_edges", "Å^-1", "q bin edges"),
        Field("partials", "", "Faber-Ziman partial structure factors S_ab(q)", blocks=True),
        Field("partials_transform", "", "S_ab(q) from the transform of the histograms"),
        Field("partials_direct", "", "S_ab(q) from the direct k-space sum"),
        Field("s", "", "total Faber-Ziman S(q)", blocks=True),
        Field("s_transform", "", "total S(q) from the transform"),
        Field("s_direct", "", "total S(q) from the direct k-space sum"),
        Field("f", "weight^2", "total scattering function F(q)", blocks=True),
        Field("form_factors", "weight", "species weights f_a(q)"),
        Field("mean_f_sq", "weight^2", "<f>^2"),
        Field("mean_sq_f", "weight^2", "<f^2>"),
        Field("concentrations", "", "number fractions c_a"),
        Field("density", "Å^-3", "total number density"),
        Field("n_kvectors", "", "reciprocal vectors per frame in each direct q bin"),
        Field("s_nn", "", "Bhatia-Thornton S_NN (binary)", blocks=True),
        Field("s_nc", "", "Bhatia-Thornton S_NC (binary)", blocks=True),
        Field("s_cc", "", "Bhatia-Thornton S_CC (binary)", blocks=True),
    ), tables=(
        Table(fields=("s", "f", "s_transform", "s_direct", "s_nn", "s_nc", "s_cc"), axis="q"),
        Table(fields=("partials", "partials_transform", "partials_direct"), axis="q",
              labels=lambda res: pair_labels(res), wide=lambda res: pair_suffixes(res)),
    ), csv_files={"bins": "gr"})  # sq.csv over q, sq_gr.csv the partial g(r) over r
    command = SQ_COMMAND

    def __init__(self, atomgroup, by="element", nbins=1500, range=(0.0, 15.0), *,
                 qbins=200, q_range=(0.0, 10.0), weights="number", window="cosine",
                 taper_width=None, q_crossover="auto", **kwargs):
        super().__init__(atomgroup, by, nbins, range, "rdf", None, True, **kwargs)
        if not self._disjoint:
            raise ValueError("by: the species of a structure factor must not overlap (an atom "
                             "in two species would be counted twice)")
        rmin, rmax = self.rdf_settings["range"]
        if rmin != 0:
            raise ValueError(f"range must start at 0 Å (the transform integrates from r = 0), "
                             f"got {range!r}; use range=(0, r_max)")
        dims = atomgroup.universe.trajectory.ts.dimensions
        if prepare_box(dims).kind == NO_BOX:
            raise ValueError(_no_box_message("this trajectory (current frame)"))
        self._require_half_width(prepare_box(dims))
        q_lo, q_hi = _check_q_range(q_range, qbins)
        dr = rmax / self.rdf_settings["bins"]
        if q_hi > np.pi / dr * (1 + 1e-12):
            need = int(np.ceil(q_hi * rmax / np.pi))
            raise ValueError(
                f"q_range={q_range!r}: q_max = {q_hi:g} Å⁻¹ is beyond what bins of "
                f"{dr:.4g} Å resolve (π/Δr = {np.pi / dr:.4g} Å⁻¹; above it the transform "
                f"only mirrors lower q). Use nbins >= {need} over range={range!r}, or a "
                f"smaller q_max")
        if window is None:
            window = "none"
        if not isinstance(window, str) or window.lower() not in WINDOWS:
            raise ValueError(f"window must be 'cosine', 'lorch', 'none' or None, got "
                             f"{window!r}")
        self.window = window.lower()
        if self.window == "cosine":
            self.taper_width = _check_taper_width(taper_width, rmax)
        elif taper_width is not None:
            raise ValueError(f"taper_width={taper_width!r} is the taper of window='cosine'; "
                             f"window={window!r} takes none (leave taper_width=None)")
        else:
            self.taper_width = None
        self.q_edges = np.linspace(q_lo, q_hi, int(qbins) + 1)
        self.q = 0.5 * (self.q_edges[:-1] + self.q_edges[1:])
        if isinstance(q_crossover, str):
            if q_crossover != "auto":
                raise ValueError(f"q_crossover must be a number (Å⁻¹), 'auto' or None, got "
                                 f"{q_crossover!r}")
            q_crossover = 5.0 * np.pi / rmax
        elif q_crossover is not None:
            if isinstance(q_crossover, bool) or not isinstance(q_crossover, numbers.Real) \
                    or not np.isfinite(q_crossover) or q_crossover <= 0:
                raise ValueError(f"q_crossover must be a positive number (Å⁻¹), 'auto' or "
                                 f"None, got {q_crossover!r}")
            q_crossover = float(q_crossover)
        self.q_crossover = q_crossover
        self._n_direct = (0 if q_crossover is None
                          else int(np.count_nonzero(self.q < q_crossover)))
        # weights: checked now (missing elements, missing species), values per q bin
        self.weights = weights
        elements = None
        if isinstance(weights, str) and weights.lower() in ("xray", "neutron"):
            elements = species_elements(self.groups, self.species)
        self._elements = elements
        self._form_factors = species_weights(self.species, self.q, weights, elements)
        self._kspace = None
        self._kvectors = None

    # -- per frame ----------------------------------------------------------------------
    def _frame_rows(self):
        rows = {"frame_volume": ()}
        if self._n_direct:
            rows["frame_kspace_sum"] = (len(self._pairs), self._n_direct)
            rows["frame_kspace_count"] = (self._n_direct,)
        return rows

    def __getstate__(self):
        state = super().__getstate__()
        state["_kvectors"] = None
        return state

    def _start_part(self, n_frames):
        self._kvectors = None
        if self._n_direct:
            self._start_kspace()

    def _single_frame(self):
        ts = self._ts
        if prepare_box(ts.dimensions).kind == NO_BOX:
            raise ValueError(_no_box_message(f"frame {ts.frame}"))
        super()._single_frame()  # (BoxStatistics checks each new box's width)
        self._store_frame("frame_volume", ts.volume)

    def _accumulate(self, coords, box):
        super()._accumulate(coords, box)  # (the positions wrapped in place first)
        if self._n_direct:
            self._kspace_frame(coords, self._ts)

    def _kspace_frame(self, coords, ts):
        """The sums over the reciprocal vectors of each direct q bin of
        :math:`\\mathrm{Re}\\,A_a A_b^*` for every species pair, for this frame."""
        from ..engine.kspace import reciprocal_vectors

        box = np.asarray(ts.triclinic_dimensions, dtype=np.float64)
        key = box.tobytes()
        if self._kvectors is None or self._kvectors[0] != key:
            edges = self.q_edges[:self._n_direct + 1]
            n, kmag = reciprocal_vectors(box, q_max=edges[-1], q_min=edges[0])
            ib = np.searchsorted(edges, kmag, side="right") - 1
            keep = (ib >= 0) & (ib < self._n_direct)
            n = np.ascontiguousarray(n[keep])
            ib = ib[keep]
            self._kvectors = (key, n, ib, np.bincount(ib, minlength=self._n_direct))
        _, n, ib, count = self._kvectors
        self._frame_amplitudes((self._frame_index, ib, count), coords, self.layout.offsets,
                               box, n)

    def _store_amplitudes(self, key, amp):
        """Store the sums of a frame's amplitudes (``key``: the frame's row, the direct q
        bin of each vector and the vectors of each bin)."""
        index, ib, count = key
        sums = np.zeros((len(self._pairs), self._n_direct))
        for k, (a, b) in enumerate(self._pairs):
            re = amp[a].real * amp[b].real + amp[a].imag * amp[b].imag
            sums[k] = np.bincount(ib, weights=re, minlength=self._n_direct)
        self.results["frame_kspace_sum"][index] = sums
        self.results["frame_kspace_count"][index] = count

    # -- results --------------------------------------------------------------------------
    def _normalise(self, res):
        super()._normalise(res)
        res.update(self._structure_factors(res))

    def _window(self, r, r_max):
        """W(r) of the transform."""
        if self.window == "lorch":
            return lorch_window(r, r_max)
        if self.window == "cosine":
            return cosine_window(r, r_max, self.taper_width)
        return np.ones_like(r)

    def _structure_factors(self, res):
        n_frames = self.n_frames
        volume = frame_sum(res.frame_volume) / n_frames
        n_atoms = np.asarray(res.n_atoms, dtype=np.float64)
        n_total = n_atoms.sum()
        a, b = self._pairs[:, 0], self._pairs[:, 1]
        n_pairs = np.asarray(res.n_pairs, dtype=np.float64)
        edges = np.asarray(res.edges, dtype=np.float64)
        r = 0.5 * (edges[:-1] + edges[1:])
        w = self._window(r, edges[-1])
        excess = (res.count / n_frames
                  - n_pairs[:, None] * shell_volumes(edges)[None, :] / volume)
        scale = n_total / (n_atoms[a] * n_atoms[b])
        transform = 1.0 + scale[:, None] * sinc_transform(excess * w, r, self.q)
        nq = len(self.q)
        direct = np.full((len(self._pairs), nq), np.nan)
        n_k = np.zeros(nq)
        if self._n_direct:
            sums = frame_sum(res.frame_kspace_sum)
            count = frame_sum(res.frame_kspace_count)
            n_k[:self._n_direct] = count / n_frames
            with np.errstate(divide="ignore", invalid="ignore"):
                mean = np.where(count > 0, sums / np.where(count > 0, count, 1), np.nan)
            self_term = np.where(a == b, n_atoms[a], 0.0)
            direct[:, :self._n_direct] = 1.0 + scale[:, None] * (mean - self_term[:, None])
        partials = transform.copy()
        partials[:, :self._n_direct] = direct[:, :self._n_direct]
        conc = n_atoms / n_total
        s, f, mean_f_sq, mean_sq_f = faber_ziman_total(partials, self._pairs, conc,
                                                       self._form_factors)
        s_t = faber_ziman_total(transform, self._pairs, conc, self._form_factors)[0]
        s_d = faber_ziman_total(direct, self._pairs, conc, self._form_factors)[0]
        out = {"q": self.q.copy(), "q_edges": self.q_edges.copy(), "partials": partials,
               "partials_transform": transform, "partials_direct": direct, "s": s,
               "s_transform": s_t, "s_direct": s_d, "f": f,
               "form_factors": self._form_factors.copy(), "mean_f_sq": mean_f_sq,
               "mean_sq_f": mean_sq_f, "concentrations": conc,
               "density": n_total / volume, "q_crossover": self.q_crossover,
               "n_kvectors": n_k}
        if len(n_atoms) == 2:
            k11, k22, k12 = (pair_index(self._pairs, i, j) for i, j in ((0, 0), (1, 1), (0, 1)))
            out["s_nn"], out["s_nc"], out["s_cc"] = bhatia_thornton(
                partials[k11], partials[k22], partials[k12], conc[0])
        return out

    def _output_parameters(self):
        from .parameters import jsonable

        params = super()._output_parameters()
        weights = self.weights
        if not isinstance(weights, str):
            weights = {str(k): (float(v) if isinstance(v, numbers.Real) else "callable")
                       for k, v in weights.items()}
        params.update({"qbins": len(self.q), "q_range": [float(self.q_edges[0]),
                                                         float(self.q_edges[-1])],
                       "weights": jsonable(weights), "window": self.window,
                       "taper_width": self.taper_width,
                       "q_crossover": self.q_crossover, "elements": self._elements})
        return params

    # -- plotting -------------------------------------------------------------------------
    @classmethod
    def _plot_axes(cls, results, parameters):
        from .declarations import PlotAxes

        q = np.asarray(results.q)
        # the y limits follow S(q) above 2π/r_max: below, a solute's cavity or the box's
        # scale can make S rise to ~100 and flatten the liquid's peaks (drawn off scale)
        q_min = 2.0 * np.pi / float(np.asarray(results.edges)[-1])
        return PlotAxes(x=q, xlabel="q (Å$^{-1}$)", ylabel="S(q)",
                        xlim=(float(results.q_edges[0]), float(results.q_edges[-1])),
                        reference=1.0, ylim_from=(q_min, None))

    @classmethod
    def _curves(cls, results, parameters, *, pairs=None, total=True):
        """The total :math:`S(q)` (`total`) and the partials of `pairs` (species pairs,
        e.g. ``[("O", "H")]``; ``'all'`` for every partial)."""
        curves = []
        species = list(results.species)
        if pairs == "all":
            pairs = [(species[i], species[j]) for i, j in results.pairs]
        for pa, pb in pairs or ():
            k = pair_index(results.pairs, species_index(species, pa),
                            species_index(species, pb))
            sem = results.partials_sem[k] if "partials_sem" in results else None
            curves.append(Curve(f"S$_{{{pa}{pb}}}$", results.partials[k], sem))
        if total:
            curves.append(Curve("total", results.s, results.get("s_sem"), color="black"))
        return curves
