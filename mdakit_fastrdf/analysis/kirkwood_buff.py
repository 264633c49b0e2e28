r"""Kirkwood–Buff integrals from the partial RDFs, with the finite-size corrections.

The Kirkwood–Buff (KB) integral of species :math:`a` and :math:`b`,

.. math::

    G_{ab} = 4\pi \int_0^\infty \bigl(g_{ab}(r) - 1\bigr)\, r^2\, dr \quad [\text{Å}^3],

connects the structure of a mixture to its thermodynamics (Kirkwood and Buff, *J. Chem.
Phys.* **19**, 774 (1951)). From a simulation of a closed, finite box the integral is biased
twice: the RDF of a closed system tends to :math:`1 - \delta_{ab}/N_b`-like values instead of
1, and the integral has to stop at a finite radius. This module computes, from the
histograms the package already has (no new pair loop):

* the RDF in the KB convention from the integer counts (:func:`rdf_from_counts`);
* the Ganguly–van der Vegt correction of a closed system's RDF
  (:func:`ganguly_van_der_vegt`);
* running integrals :math:`G_{ab}(L)` with the weight of a finite spherical subvolume
  (Krüger et al.) or the truncation weights :math:`u_0, u_1, u_2` (Krüger and Vlugt)
  (:func:`running_kb`, :func:`kb_integral`, :func:`weight_function`);
* the extrapolation to the thermodynamic limit with its fit statistics
  (:func:`extrapolate`, :func:`select_fit_range`);
* for binary mixtures, what KB theory derives from :math:`G_{ab}`: excess coordination
  numbers, preferential solvation, :math:`(\partial\ln\gamma_1/\partial\ln x_1)_{p,T}`,
  partial molar volumes and the isothermal compressibility (:func:`binary_mixture`);
* the whole chain for one pair (:func:`kirkwood_buff`, :func:`pair_kirkwood_buff` for an
  ``InterRDF``) and for every species pair of a system (:class:`KirkwoodBuff`, a
  :class:`~mdakit_fastrdf.SpeciesRDF` that adds these results).

The functions live in one file per job (:mod:`.kb_integrals`: the RDF convention, the
correction, the weights and running integrals; :mod:`.kb_limit`: the extrapolation and the
whole chain; :mod:`.kb_mixtures`: binary mixtures), and are importable from here; this file
holds the analysis.

Lengths are in Å, volumes and KB integrals in Å³ per molecule (multiply by
:data:`A3_TO_CM3_PER_MOL` for cm³/mol), densities in Å⁻³. See the documentation page
"Kirkwood–Buff integrals" for the conventions side by side with those of ``kbkit``.
"""

from __future__ import annotations

import warnings

import numpy as np
from MDAnalysis.analysis.results import Results

from ..engine import NO_BOX, prepare_box
from .checks import EXCLUDE_SAME, _user_stacklevel
from .declarations import Field

# the theory, the fit and the thermodynamics, one file each; their public names are this
# module's too (the documented paths, mdakit_fastrdf.analysis.kirkwood_buff.*)
from .kb_integrals import (
    _CORRECTIONS,
    _INTEGRATIONS,
    A3_TO_CM3_PER_MOL,
    R2_THRESHOLD,
    WEIGHTS,
    _check_positive,
    _choice,
    _radii,
    ganguly_van_der_vegt,
    kb_integral,
    rdf_from_counts,
    running_kb,
    weight_function,
)
from .kb_limit import (
    _excluded_pairs,
    _poor_fit_message,
    _window,
    extrapolate,
    kirkwood_buff,
    pair_kirkwood_buff,
    select_fit_range,
)
from .kb_mixtures import binary_mixture, excess_coordination_numbers
from .species import SpeciesRDF

__all__ = [
    "A3_TO_CM3_PER_MOL",
    "WEIGHTS",
    "KirkwoodBuff",
    "R2_THRESHOLD",
    "binary_mixture",
    "excess_coordination_numbers",
    "extrapolate",
    "ganguly_van_der_vegt",
    "kb_integral",
    "kirkwood_buff",
    "pair_kirkwood_buff",
    "rdf_from_counts",
    "running_kb",
    "select_fit_range",
    "weight_function",
]


# -- the analysis -----------------------------------------------------------------------------
class KirkwoodBuff(SpeciesRDF):
    r"""Kirkwood–Buff integrals of every species pair (a :class:`SpeciesRDF` that adds them).

    Takes the arguments of :class:`~mdakit_fastrdf.SpeciesRDF` (the histograms are the
    same: one kernel call per frame for all species pairs, every device and parallel
    backend) and, keyword only, the options of the KB integrals. ``norm`` must be
    ``'rdf'``, ``range`` must start at 0 and end within half the smallest width of the
    (periodic) box.

    Parameters
    ----------
    atomgroup, by, nbins, range, norm, exclude_same, exclude_self :
        As :class:`~mdakit_fastrdf.SpeciesRDF` (see Notes for molecules).
    correction : {'gv', 'none'}
        Keyword only. ``'gv'`` (default): the Ganguly–van der Vegt correction
        (:func:`ganguly_van_der_vegt`).
    weight : {'kruger', 'none', 'u1', 'u2'}
        Keyword only. The weight of the running integral (:func:`weight_function`);
        ``'kruger'`` (default) is extrapolated to the thermodynamic limit.
    fit_range : tuple of float, 'auto' or None
        Keyword only. Window of :math:`L` in Å for the extrapolation (``'kruger'``) or the
        average (other weights); None: :math:`(r_\mathrm{max}/2, r_\mathrm{max})`;
        ``'auto'``: chosen by :math:`R^2` for each pair (:func:`select_fit_range`; block
        averages reuse the windows of the whole run).
    integration : {'histogram', 'trapezoid'}
        Keyword only. See :func:`running_kb`.
    r2_threshold : float or None
        Keyword only. After :meth:`run`, one RuntimeWarning naming the pairs whose
        extrapolation (``weight='kruger'``) has :math:`R^2` (``results.kb_r2``) below it,
        whatever chose the window (default 0.99; None: no warning). Blocks are not checked:
        their fits are noisier by design, their spread is the error bar.
    temperature : float, optional
        Keyword only. K, for :math:`\kappa_T` of a binary mixture.
    **kwargs
        ``device``, ``precision``, ``n_threads``, ``method``, ``verbose`` of
        :class:`~mdakit_fastrdf.SpeciesRDF`.

    Attributes
    ----------
    results.kb_rdf : numpy.ndarray
        ``(n_pairs, nbins)`` :math:`g_{ab}` in the KB convention (:func:`rdf_from_counts`),
        corrected when ``correction='gv'``: the function integrated.
    results.kb_L : numpy.ndarray
        ``(nbins,)`` upper limits :math:`L` of the running integrals, Å.
    results.kb_running : numpy.ndarray
        ``(n_pairs, nbins)`` :math:`G_{ab}(L)`, Å³.
    results.kb : numpy.ndarray
        ``(n_pairs,)`` :math:`G_{ab}^\infty`, Å³.
    results.kb_matrix : numpy.ndarray
        ``(n_species, n_species)`` :math:`G^\infty` as a symmetric matrix.
    results.kb_surface, results.kb_r2, results.kb_rms, results.kb_stderr : numpy.ndarray
        ``(n_pairs,)`` fit statistics of :func:`kirkwood_buff`.
    results.kb_fit_range : numpy.ndarray
        ``(n_pairs, 2)`` the window used, Å.
    results.kb_density : numpy.ndarray
        ``(n_species,)`` :math:`\rho_a = N_a / \langle V\rangle`, Å⁻³.
    results.kb_delta : numpy.ndarray
        ``(n_pairs,)`` :math:`\delta_{ab}` of the correction (pairs never counted, per
        atom of :math:`a`).
    results.kb_excess_coordination : numpy.ndarray
        ``(n_species, n_species)`` :math:`N_{ab} = \rho_b G^\infty_{ab}`.
    results.kb_partial_molar_volume : numpy.ndarray
        With exactly two species, :func:`binary_mixture` of :math:`G^\infty` (species 1 is
        ``results.species[0]``, the larger) gives this and ``kb_mole_fraction``,
        ``kb_preferential_solvation``, ``kb_delta_12``, ``kb_dlngamma``,
        ``kb_compressibility_kT`` and, with `temperature`, ``kb_compressibility``.

    With ``run(blocks=B)`` every quantity above of shape per pair or per species, and the
    running integrals, also get ``block_<name>`` and ``<name>_sem``.

    Notes
    -----
    KB theory counts molecules: make each species one site per molecule (e.g.
    ``by={'water': 'name OW', 'methanol': 'name C1'}``), or exclude the pairs within a
    molecule (``exclude_same='residue'``; :math:`\delta_{ab}` then counts the excluded
    pairs per atom of :math:`a`).

    Examples
    --------
    ::

        kb = KirkwoodBuff(u.atoms, by="type", nbins=200, range=(0, 20)).run(blocks=5)
        kb.results.kb, kb.results.kb_sem       # G_ab (Å³) and their standard errors
        kb.results.kb_partial_molar_volume     # a binary mixture: Å³ per molecule
    """

    #: beyond half the smallest box width is an error (boxes.BoxStatistics)
    half_width_reason = "its KB integral would be meaningless"

    outputs = SpeciesRDF.outputs.extend(fields=(
        Field("kb_rdf", "", "g(r) in the KB convention, corrected", blocks=True),
        Field("kb_L", "Å", "upper limit L of the running integrals"),
        Field("kb_running", "Å^3", "running Kirkwood-Buff integral G(L)", blocks=True),
        Field("kb", "Å^3", "Kirkwood-Buff integral in the thermodynamic limit", blocks=True),
        Field("kb_matrix", "Å^3", "G_ab as a species x species matrix", blocks=True),
        Field("kb_surface", "Å^4", "surface term F of L G(L) = G L + F"),
        Field("kb_r2", "", "R^2 of the extrapolation"),
        Field("kb_rms", "Å^3", "RMS residual of the extrapolation"),
        Field("kb_stderr", "Å^3", "standard error of the slope of the extrapolation"),
        Field("kb_fit_range", "Å", "window of the extrapolation"),
        Field("kb_density", "Å^-3", "number density of each species"),
        Field("kb_delta", "", "pairs never counted per atom of a (delta_ab)"),
        Field("kb_excess_coordination", "", "excess coordination numbers rho_b G_ab",
              blocks=True),
        Field("kb_mole_fraction", "", "mole fractions (binary mixture)"),
        Field("kb_preferential_solvation", "Å^3", "G_aa - G_ab (binary mixture)", blocks=True),
        Field("kb_delta_12", "Å^3", "G_11 + G_22 - 2 G_12 (binary mixture)", blocks=True),
        Field("kb_dlngamma", "", "(d ln gamma_1 / d ln x_1)_p,T (binary mixture)",
              blocks=True),
        Field("kb_partial_molar_volume", "Å^3", "partial molar volumes per molecule "
              "(binary mixture)", blocks=True),
        Field("kb_compressibility_kT", "Å^3", "kappa_T k_B T (binary mixture)", blocks=True),
        Field("kb_compressibility", "Pa^-1", "isothermal compressibility (binary mixture)",
              blocks=True),
    ))

    def __init__(self, atomgroup, by="element", nbins=75, range=(0.0, 15.0), norm="rdf",
                 exclude_same=None, exclude_self=False, *, correction="gv", weight="kruger",
                 fit_range=None, integration="histogram", temperature=None,
                 r2_threshold=R2_THRESHOLD, **kwargs):
        super().__init__(atomgroup, by, nbins, range, norm, exclude_same, exclude_self,
                         **kwargs)
        if self.norm != "rdf":
            raise ValueError(f"norm must be 'rdf' for KB integrals (they need the box "
                             f"volume), got {norm!r}")
        rmin = self.rdf_settings["range"][0]
        if rmin != 0:
            raise ValueError(f"range must start at 0 Å for KB integrals, got {range!r}")
        dims = atomgroup.universe.trajectory.ts.dimensions
        if dims is None or not np.all(np.isfinite(dims)) or np.any(dims[:3] <= 0):
            raise ValueError("KirkwoodBuff needs a periodic box: the trajectory has no box "
                             "(or one of zero volume) in the current frame")
        box = prepare_box(dims)
        if box.kind == NO_BOX:
            raise ValueError("KirkwoodBuff needs a periodic box of positive volume")
        self._require_half_width(box)
        self.kb_options = {
            "correction": _choice(correction, _CORRECTIONS, "correction"),
            "weight": _choice(weight, tuple(WEIGHTS), "weight"),
            "integration": _choice(integration, _INTEGRATIONS, "integration"),
        }
        if fit_range is not None and not isinstance(fit_range, str):
            edges = self._kb_edges()
            _window(_radii(edges, self.kb_options["integration"]), fit_range, edges[-1])  # a bad window fails now, not after the run
            fit_range = tuple(float(v) for v in fit_range)
        elif isinstance(fit_range, str) and fit_range != "auto":
            raise ValueError(f"fit_range must be (Lmin, Lmax), 'auto' or None, got "
                             f"{fit_range!r}")
        elif fit_range == "auto" and self.kb_options["weight"] != "kruger":
            raise ValueError("fit_range='auto' needs weight='kruger'")
        self.fit_range = fit_range
        if r2_threshold is not None:
            r2_threshold = float(r2_threshold)
        self.r2_threshold = r2_threshold
        if temperature is not None:
            temperature = float(_check_positive(temperature, "temperature"))
        self.temperature = temperature
        self._kb_windows = None

    def _kb_edges(self):
        return np.histogram([-1], bins=self.rdf_settings["bins"],
                            range=self.rdf_settings["range"])[1]

    def run(self, *args, **kwargs):
        """Perform the calculation (:meth:`mdakit_fastrdf.SpeciesRDF.run`), then warn once
        (RuntimeWarning) if the extrapolation of a pair has :math:`R^2` below
        `r2_threshold` (see Parameters)."""
        self._kb_windows = None  # 'auto' windows: chosen on the whole run, reused by blocks
        super().run(*args, **kwargs)
        if self.r2_threshold is not None and self.kb_options["weight"] == "kruger":
            res = self.results
            labels = ["-".join(str(s) for s in pair) for pair in res.pair_labels]
            message = _poor_fit_message(res.kb_r2, res.kb_fit_range, self.fit_range,
                                       self.r2_threshold, labels, where="KirkwoodBuff")
            if message is not None:
                warnings.warn(message, RuntimeWarning, stacklevel=_user_stacklevel())
        return self

    def _output_parameters(self):
        fit = self.fit_range
        return {**super()._output_parameters(), **self.kb_options,
                "fit_range": fit if fit is None or isinstance(fit, str) else list(fit),
                "temperature": self.temperature, "r2_threshold": self.r2_threshold}

    def _pair_exclusions(self):
        """Per pair: self pairs counted at distance 0 per frame, and pairs never counted."""
        n_self, excluded = [], []
        attr = EXCLUDE_SAME.get(self.exclude_same)
        for a, b in self._pairs:
            ga, gb = self.groups[a], self.groups[b]
            common = len(np.intersect1d(ga.ix, gb.ix))
            if attr is not None:
                excluded.append(_excluded_pairs(getattr(ga, attr), getattr(gb, attr)))
                n_self.append(0)
            else:
                excluded.append(common)
                n_self.append(0 if self.exclude_self else common)
        return np.array(n_self, dtype=np.float64), np.array(excluded, dtype=np.float64)

    def _normalise(self, res):
        super()._normalise(res)
        res.update(self._kb_results(res))

    def _kb_results(self, res):
        """The KB results of `res` (the run's, or one block's)."""
        volume = res.volume_cum / self.n_frames
        n_atoms = np.asarray(res.n_atoms, dtype=np.float64)
        a, b = self._pairs[:, 0], self._pairs[:, 1]
        n_self, excluded = self._pair_exclusions()
        g = rdf_from_counts(res.count, res.edges, self.n_frames, volume, n_atoms[a],
                            n_atoms[b], n_self)
        fit_range = self.fit_range
        if fit_range == "auto":
            if self._kb_windows is None:
                kb = kirkwood_buff(res.edges, g, n_b=n_atoms[b], volume=volume,
                                   delta=excluded / n_atoms[a], fit_range="auto",
                                   r2_threshold=None, **self.kb_options)
                self._kb_windows = [tuple(w) for w in kb.fit_range]
            windows = self._kb_windows
        else:
            windows = [fit_range] * len(self._pairs)
        parts = [kirkwood_buff(res.edges, g[k], n_b=n_atoms[b[k]], volume=volume,
                               delta=excluded[k] / n_atoms[a[k]], fit_range=windows[k],
                               r2_threshold=None, **self.kb_options)
                 for k in np.arange(len(self._pairs))]
        out = Results(
            kb_rdf=np.stack([p.rdf for p in parts]),
            kb_L=parts[0].L,
            kb_running=np.stack([p.running for p in parts]),
            kb_fit_range=np.stack([p.fit_range for p in parts]),
            kb_density=n_atoms / volume,
            kb_delta=excluded / n_atoms[a],
        )
        for name in ("kb", "surface", "r2", "rms", "stderr"):
            out["kb" if name == "kb" else "kb_" + name] = np.array([p[name] for p in parts])
        n = len(n_atoms)
        matrix = np.zeros((n, n))
        matrix[a, b] = out.kb
        matrix[b, a] = out.kb
        out.kb_matrix = matrix
        out.kb_excess_coordination = excess_coordination_numbers(matrix, out.kb_density)
        if n == 2:
            binary = binary_mixture(matrix, out.kb_density, self.temperature)
            for name, value in binary.items():
                if name != "excess_coordination":
                    out["kb_" + name] = np.asarray(value, dtype=np.float64)
        return out
