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

#: Å³ per molecule to cm³ per mole (Avogadro's number × 10⁻²⁴).
A3_TO_CM3_PER_MOL = 0.602214076
#: Boltzmann's constant, J/K.
_K_B = 1.380649e-23

#: The weights :math:`w(x)`, :math:`x = r/L`, as polynomial coefficients of
#: :math:`1, x, x^2, \ldots` (see :func:`weight_function`).
WEIGHTS = {
    # plain truncation at L: 4 pi r^2 (Krueger and Vlugt's u0)
    "none": (1.0,),
    # finite sphere of diameter L: Krueger et al., JPCL 4, 235 (2013)
    "kruger": (1.0, -1.5, 0.0, 0.5),
    # Krueger and Vlugt, PRE 97, 051301(R) (2018)
    "u1": (1.0, 0.0, 0.0, -1.0),
    "u2": (1.0, 0.0, 0.0, -23.0 / 8.0, 3.0 / 4.0, 9.0 / 8.0),
}
_CORRECTIONS = ("gv", "none")
_INTEGRATIONS = ("histogram", "trapezoid")
#: The :math:`R^2` of the line :math:`L\,G(L)` below which every extrapolation warns
#: (``kbkit``'s threshold, where it raises).
R2_THRESHOLD = 0.99


# -- checks ------------------------------------------------------------------------------
def _choice(value, choices, name):
    key = str(value).lower()
    if key not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return key


def _check_edges(edges):
    edges = np.asarray(edges, dtype=np.float64)
    if edges.ndim != 1 or len(edges) < 2:
        raise ValueError(f"edges must be a 1-D array of at least 2 bin edges, got shape "
                         f"{edges.shape}")
    if not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
        raise ValueError("edges must be finite and strictly increasing")
    if edges[0] != 0.0:
        raise ValueError(
            f"edges must start at 0 Å (a KB integral runs from r = 0; the histogram starts at "
            f"{edges[0]} Å): compute the RDF with range=(0, rmax)")
    return edges


def _check_rdf(rdf, edges, name="rdf"):
    rdf = np.asarray(rdf, dtype=np.float64)
    if rdf.ndim == 0 or rdf.shape[-1] != len(edges) - 1:
        raise ValueError(f"{name} has shape {rdf.shape}; its last axis must hold one value per "
                         f"bin ({len(edges) - 1} bins from edges of {len(edges)})")
    return rdf


def _check_volume(volume):
    v = np.asarray(volume, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(
            f"volume must be the positive mean box volume in Å³, got {volume!r} (no periodic "
            f"box, or a box of zero volume?)")
    return v


def _check_positive(value, name):
    v = np.asarray(value, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(f"{name} must be positive, got {value!r}")
    return v


def _radii(edges, integration):
    """The upper limits L of the running integrals: the upper bin edges (histogram rule) or
    the bin centres (trapezoid rule)."""
    return edges[1:].copy() if integration == "histogram" else 0.5 * (edges[:-1] + edges[1:])


# -- the weights -------------------------------------------------------------------------
def weight_function(x, weight="kruger"):
    r"""The weight :math:`w(x)` of a running KB integral, :math:`x = r/L`.

    .. math::

        G(L) = \int_0^L \bigl(g(r) - 1\bigr)\, 4\pi r^2\, w(r/L)\, dr

    Parameters
    ----------
    x : array_like
        :math:`r/L` (0 to 1).
    weight : {'none', 'kruger', 'u1', 'u2'}
        ``'none'``: :math:`w = 1` (plain truncation at :math:`L`, Krüger and Vlugt's
        :math:`u_0`).
        ``'kruger'``: :math:`w = 1 - \tfrac32 x + \tfrac12 x^3`, the exact weight of a
        spherical subvolume of diameter :math:`L` embedded in an infinite system; then
        :math:`G(L) = G^\infty + F^\infty/L + O(L^{-2})` (Krüger et al., *J. Phys. Chem.
        Lett.* **4**, 235 (2013), doi:10.1021/jz301992u).
        ``'u1'``: :math:`w = 1 - x^3`, i.e. :math:`\tfrac{d}{dL}[L\,G(L)]` with the
        ``'kruger'`` weight, and ``'u2'``: :math:`w = 1 - \tfrac{23}{8}x^3 + \tfrac34 x^4 +
        \tfrac98 x^5`: direct estimates of :math:`G^\infty` (Krüger and Vlugt, *Phys. Rev.
        E* **97**, 051301(R) (2018), doi:10.1103/PhysRevE.97.051301).

    Returns
    -------
    numpy.ndarray
        :math:`w(x)`.
    """
    coeffs = WEIGHTS[_choice(weight, tuple(WEIGHTS), "weight")]
    x = np.asarray(x, dtype=np.float64)
    return sum(c * x**j for j, c in enumerate(coeffs) if c)


# -- the RDF in the KB convention -------------------------------------------------------------
def rdf_from_counts(count, edges, n_frames, volume, n_a, n_b, n_self=0):
    r"""The RDF in the KB convention from pair counts summed over frames.

    .. math::

        g_{ab}(r_k) = \frac{\bigl(n_{ab,k} - n^\mathrm{self}_{ab} N_\mathrm{frames}
        [k = 0]\bigr)\,\langle V\rangle}{N_\mathrm{frames}\, V_k\, N_a N_b},\qquad
        V_k = \tfrac43\pi(r_{k+1}^3 - r_k^3)

    i.e. the density of :math:`b` around an :math:`a` normalised by the mean density
    :math:`\rho_b = N_b/\langle V\rangle` of all :math:`b` (the convention of ``gmx rdf``
    and of the Ganguly–van der Vegt correction: in a closed ideal gas
    :math:`g_{aa} \to 1 - 1/N_a`). The counts of the package's histograms for
    :math:`a = b` are ordered pairs, and without exclusions each atom is paired with itself
    at distance 0 (the first bin when ``rmin`` is 0): `n_self` such pairs per frame are
    taken out of the first bin.

    Parameters
    ----------
    count : array_like
        ``(..., nbins)`` pair counts summed over the frames.
    edges : array_like
        ``nbins + 1`` bin edges in Å, from 0.
    n_frames : int
        Frames summed.
    volume : float
        Mean box volume :math:`\langle V\rangle` in Å³.
    n_a, n_b : int or array_like
        Atoms of the two species (broadcast against the leading axes of `count`).
    n_self : int or array_like
        Atoms paired with themselves in each frame (:math:`|a \cap b|` without exclusions,
        else 0).

    Returns
    -------
    numpy.ndarray
        ``(..., nbins)`` :math:`g_{ab}`.
    """
    edges = _check_edges(edges)
    count = _check_rdf(count, edges, "count").copy()
    volume = _check_volume(volume)
    n_frames = _check_positive(n_frames, "n_frames")
    n_a, n_b = _check_positive(n_a, "n_a"), _check_positive(n_b, "n_b")
    count[..., 0] -= np.asarray(n_self, dtype=np.float64) * n_frames
    shells = 4.0 / 3.0 * np.pi * np.diff(edges**3)
    return count * (volume / (n_frames * n_a * n_b))[..., None] / shells


# -- the Ganguly-van der Vegt correction ------------------------------------------------------
def _excess_at_samples(edges, h, density, integration):
    r""":math:`\Delta N(r) = \rho \int_0^r 4\pi s^2 h(s)\,ds` and :math:`V(r)` at the sample
    points of `integration` (the bin centres in both rules)."""
    r = 0.5 * (edges[:-1] + edges[1:])
    if integration == "histogram":
        shells = 4.0 / 3.0 * np.pi * np.diff(edges**3)
        below = np.cumsum(h * shells, axis=-1) - h * shells  # bins wholly below the centre
        part = h * (4.0 / 3.0 * np.pi) * (r**3 - edges[:-1] ** 3)
        integral = below + part
    else:
        f = 4.0 * np.pi * r**2 * h
        steps = 0.5 * (f[..., 1:] + f[..., :-1]) * np.diff(r)
        integral = np.concatenate([np.zeros(h.shape[:-1] + (1,)), np.cumsum(steps, axis=-1)],
                                  axis=-1)
    return np.asarray(density)[..., None] * integral, 4.0 / 3.0 * np.pi * r**3


def ganguly_van_der_vegt(edges, rdf, n_b, volume, delta=0.0, integration="histogram"):
    r"""The Ganguly–van der Vegt correction of the RDF of a closed system.

    In a closed box of volume :math:`V` holding :math:`N_b` molecules of :math:`b`, the
    molecules that are not within :math:`r` of a reference :math:`a` fill the rest of the
    box, so that far from the reference the density of :math:`b` is not
    :math:`\rho_b = N_b/V` but
    :math:`(N_b - \delta_{ab} - \rho_b V(r) - \Delta N_{ab}(r)) / (V - V(r))`. Rescaling
    :math:`g` by this density gives (Ganguly and van der Vegt, *J. Chem. Theory Comput.*
    **9**, 1347 (2013), doi:10.1021/ct301017q):

    .. math::

        g^\mathrm{GV}_{ab}(r) = g_{ab}(r)\,
        \frac{N_b\,\bigl(1 - V(r)/V\bigr)}
             {N_b\,\bigl(1 - V(r)/V\bigr) - \Delta N_{ab}(r) - \delta_{ab}},
        \qquad V(r) = \tfrac43 \pi r^3,

    .. math::

        \Delta N_{ab}(r) = \rho_b \int_0^r 4\pi s^2 \bigl(g_{ab}(s) - 1\bigr)\, ds ,

    the excess number of :math:`b` within :math:`r` of an :math:`a`.

    Parameters
    ----------
    edges : array_like
        Bin edges in Å, from 0.
    rdf : array_like
        ``(..., nbins)`` :math:`g_{ab}` in the KB convention (:func:`rdf_from_counts`).
    n_b : float or array_like
        :math:`N_b` (broadcast against the leading axes of `rdf`).
    volume : float
        Mean box volume in Å³.
    delta : float or array_like
        :math:`\delta_{ab}`: the number of :math:`b` an :math:`a` can never see (the
        Kronecker delta for species of whole molecules: 1 for :math:`a = b`; with pairs
        within a molecule excluded, the excluded pairs per :math:`a`).
    integration : {'histogram', 'trapezoid'}
        ``'histogram'``: :math:`g` is constant in each bin and the correction is evaluated
        at the bin centres with :math:`\Delta N` integrated exactly up to the centre.
        ``'trapezoid'``: :math:`g` is sampled at the bin centres and :math:`\Delta N` is the
        cumulative trapezoid rule from the first centre (as ``kbkit`` does).

    Returns
    -------
    numpy.ndarray
        :math:`g^\mathrm{GV}_{ab}` (NaN where the denominator is not positive, e.g. a
        species of one atom with itself).
    """
    edges = _check_edges(edges)
    rdf = _check_rdf(rdf, edges)
    integration = _choice(integration, _INTEGRATIONS, "integration")
    volume = _check_volume(volume)
    n_b = _check_positive(n_b, "n_b")
    delta = np.asarray(delta, dtype=np.float64)
    if np.any(delta < 0) or not np.all(np.isfinite(delta)):
        raise ValueError(f"delta must be >= 0, got {delta!r}")
    lead = rdf.shape[:-1]
    n_b = np.broadcast_to(n_b, lead) if lead else n_b
    excess, v_r = _excess_at_samples(edges, rdf - 1.0, n_b / volume, integration)
    outside = n_b[..., None] * (1.0 - v_r / volume[..., None])
    denom = outside - excess - np.asarray(delta)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, rdf * outside / denom, np.nan)


# -- running integrals ------------------------------------------------------------------------
def kb_integral(edges, rdf, L, weight="none"):
    r"""The KB integral up to :math:`L` of a histogram RDF (constant in each bin).

    .. math::

        G(L) = \int_0^L \bigl(g(r) - 1\bigr)\, 4\pi r^2\, w(r/L)\, dr
             = \sum_k h_k \int_{r_k}^{\min(r_{k+1}, L)} 4\pi r^2 w(r/L)\, dr

    with :math:`h_k = g_k - 1`. The weight (a polynomial, :func:`weight_function`) is
    integrated exactly over each shell, so the result is exact for the histogram; the bin
    that holds :math:`L` counts up to :math:`L`. With ``weight='none'`` and :math:`L` an
    edge this is the rectangle sum :math:`\sum_k h_k V_k` (Kirkwood and Buff 1951).

    Parameters
    ----------
    edges : array_like
        Bin edges in Å, from 0.
    rdf : array_like
        ``(..., nbins)`` :math:`g(r)`.
    L : float or array_like
        Upper limits in Å, :math:`0 < L \le r_\mathrm{max}` (the last edge). For
        ``'kruger'`` :math:`L` is the diameter of the spherical subvolume.
    weight : {'none', 'kruger', 'u1', 'u2'}
        See :func:`weight_function`.

    Returns
    -------
    numpy.ndarray
        ``(..., len(L))`` (or ``(...)`` for a scalar `L`) :math:`G(L)` in Å³.
    """
    edges = _check_edges(edges)
    rdf = _check_rdf(rdf, edges)
    coeffs = WEIGHTS[_choice(weight, tuple(WEIGHTS), "weight")]
    scalar = np.ndim(L) == 0
    L = np.atleast_1d(np.asarray(L, dtype=np.float64))
    rmax = edges[-1]
    if L.ndim != 1 or not np.all(np.isfinite(L)) or np.any(L <= 0):
        raise ValueError(f"L must be positive radii in Å, got {L!r}")
    if np.any(L > rmax * (1 + 1e-12)):
        raise ValueError(f"L = {L.max()} Å is beyond the RDF's r_max ({rmax} Å): the integral "
                         f"needs g(r) up to L")
    s = edges / rmax  # scaled, so that the powers stay of order 1
    x = np.minimum(L / rmax, 1.0)
    h = rdf - 1.0
    k = np.clip(np.searchsorted(edges, L, side="right") - 1, 0, len(edges) - 2)
    out = np.zeros(rdf.shape[:-1] + (len(L),))
    for j, c in enumerate(coeffs):
        if not c:
            continue
        p = j + 3
        full = np.concatenate([np.zeros(rdf.shape[:-1] + (1,)),
                               np.cumsum(h * np.diff(s**p), axis=-1)], axis=-1)
        part = h[..., k] * (x**p - s[k] ** p)
        out += c / p * x ** (-j) * (full[..., k] + part)
    out *= 4.0 * np.pi * rmax**3
    return out[..., 0] if scalar else out


def running_kb(edges, rdf, weight="none", integration="histogram"):
    r"""Running KB integrals :math:`G(L)` at every bin.

    .. math::

        G(L) = \int_0^L \bigl(g(r) - 1\bigr)\, 4\pi r^2\, w(r/L)\, dr

    Parameters
    ----------
    edges : array_like
        Bin edges in Å, from 0.
    rdf : array_like
        ``(..., nbins)`` :math:`g(r)`.
    weight : {'none', 'kruger', 'u1', 'u2'}
        See :func:`weight_function`.
    integration : {'histogram', 'trapezoid'}
        ``'histogram'`` (default): :math:`g` constant in each bin, :math:`L` the upper bin
        edges, the weight integrated exactly over each shell (:func:`kb_integral`).
        ``'trapezoid'``: :math:`g` sampled at the bin centres, :math:`L` the bin centres, the
        trapezoid rule from the first centre (``kbkit``'s rule:
        :math:`G(L_i) = \mathrm{trapz}(h\,4\pi r^2 w(r/L_i), r_{0..i})`, so
        :math:`G(L_0) = 0`).

    Returns
    -------
    L : numpy.ndarray
        ``(nbins,)`` upper limits in Å.
    G : numpy.ndarray
        ``(..., nbins)`` running integrals in Å³.
    """
    edges = _check_edges(edges)
    rdf = _check_rdf(rdf, edges)
    integration = _choice(integration, _INTEGRATIONS, "integration")
    coeffs = WEIGHTS[_choice(weight, tuple(WEIGHTS), "weight")]
    L = _radii(edges, integration)
    if integration == "histogram":
        return L, kb_integral(edges, rdf, L, weight)
    h = rdf - 1.0
    r = L / L[-1]
    dr = np.diff(r)
    out = np.zeros(rdf.shape)
    for j, c in enumerate(coeffs):
        if not c:
            continue
        f = r ** (2 + j) * h
        cum = np.concatenate([np.zeros(rdf.shape[:-1] + (1,)),
                              np.cumsum(0.5 * (f[..., 1:] + f[..., :-1]) * dr, axis=-1)],
                             axis=-1)
        out += c * r ** (-j) * cum
    return L, 4.0 * np.pi * L[-1] ** 3 * out


# -- the thermodynamic limit ------------------------------------------------------------------
def _window(L, fit_range, rmax=None, name="fit_range"):
    """The points of `L` in the window `fit_range` (ValueError if it reaches beyond `rmax`,
    default ``L[-1]``, or holds fewer than 3 points)."""
    rmax = L[-1] if rmax is None else rmax
    try:
        lo, hi = (float(v) for v in fit_range)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (Lmin, Lmax) in Å, got {fit_range!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi)) or not lo < hi:
        raise ValueError(f"{name} must be an increasing pair of finite radii, got {fit_range!r}")
    if hi > rmax * (1 + 1e-9):
        raise ValueError(f"{name}={fit_range!r} reaches beyond the RDF's r_max ({rmax} Å)")
    tol = 1e-9 * rmax
    mask = (L >= lo - tol) & (L <= hi + tol)
    if mask.sum() < 3:
        raise ValueError(f"{name}={fit_range!r} holds {int(mask.sum())} point(s) of the "
                         f"running integral; it needs at least 3 (widen it or use more bins)")
    return mask


def _linear_fit(x, y):
    """Least squares y = a x + b along the last axis: slope, intercept, R², RMS residual,
    standard error of the slope."""
    n = x.shape[-1]
    xm, ym = x.mean(axis=-1), y.mean(axis=-1)
    dx, dy = x - xm[..., None], y - ym[..., None]
    sxx = (dx * dx).sum(axis=-1)
    slope = (dx * dy).sum(axis=-1) / sxx
    intercept = ym - slope * xm
    resid = y - (slope[..., None] * x + intercept[..., None])
    ss_res = (resid**2).sum(axis=-1)
    ss_tot = (dy * dy).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(ss_tot > 0, 1.0 - ss_res / ss_tot, np.nan)
        stderr = np.sqrt(ss_res / (n - 2) / sxx) if n > 2 else np.full_like(slope, np.nan)
    return slope, intercept, r2, resid, stderr


def extrapolate(L, G, fit_range, r_max=None):
    r"""Extrapolate finite-volume KB integrals to the thermodynamic limit.

    For a spherical subvolume of diameter :math:`L` (the ``'kruger'`` weight),
    :math:`G(L) = G^\infty + F^\infty/L` for :math:`L` beyond the correlation length
    (Krüger et al. 2013). As Dawass et al. (*Nanomaterials* **10**, 771 (2020),
    doi:10.3390/nano10040771) do, a straight line is fitted by least squares to

    .. math::

        L\,G(L) = G^\infty L + F^\infty

    over :math:`L_\mathrm{min} \le L \le L_\mathrm{max}`; the slope is :math:`G^\infty`.

    Parameters
    ----------
    L : array_like
        ``(n,)`` radii in Å (from :func:`running_kb`).
    G : array_like
        ``(..., n)`` running integrals with the ``'kruger'`` weight, Å³.
    fit_range : tuple of float
        ``(Lmin, Lmax)`` in Å; at least 3 points of `L` inside, ``Lmax`` not beyond
        `r_max`.
    r_max : float, optional
        The RDF's :math:`r_\mathrm{max}` in Å (default ``L[-1]``).

    Returns
    -------
    Results
        ``kb`` (:math:`G^\infty`, Å³), ``surface`` (:math:`F^\infty`, Å⁴), ``r2`` (the
        coefficient of determination of the line in :math:`L\,G`), ``rms`` (root mean
        square residual of :math:`G` about :math:`G^\infty + F^\infty/L`, Å³), ``stderr``
        (standard error of the slope from the residuals, Å³; the points are correlated, so
        prefer block averaging for an error bar), ``n_points`` and ``fit_range`` (the
        first and last :math:`L` used).
    """
    L = np.asarray(L, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    if L.ndim != 1 or G.shape[-1:] != L.shape:
        raise ValueError(f"G has shape {G.shape}; its last axis must match L {L.shape}")
    mask = _window(L, fit_range, r_max)
    x = L[mask]
    slope, intercept, r2, resid, stderr = _linear_fit(
        np.broadcast_to(x, G.shape[:-1] + x.shape), G[..., mask] * x)
    rms = np.sqrt(np.mean((resid / x) ** 2, axis=-1))
    return Results(kb=slope, surface=intercept, r2=r2, rms=rms, stderr=stderr,
                   n_points=int(mask.sum()), fit_range=np.array([x[0], x[-1]]))


def select_fit_range(L, G, min_width=10.0, start=10.0, tail=0.1, r2_threshold=0.99):
    r"""A fit window for :func:`extrapolate` chosen by :math:`R^2`, as ``kbkit`` chooses it.

    The candidate windows lie within :math:`[\min(\text{start}, L_\mathrm{max} -
    \text{min\_width}), L_\mathrm{max}]`, end in the last `tail` fraction of the points
    there, are at least `min_width` wide and hold at least 3 points. The window with the
    largest :math:`R^2` of the line :math:`L\,G(L)` wins; among windows within 0.001 of
    that :math:`R^2`, the widest. (``kbkit``'s defaults, in its nm: start 1 nm, width
    1 nm, last 10 %; ``kbkit`` thins the candidates in boxes above 4 nm and breaks ties
    in scan order, so its window can differ.)

    Parameters
    ----------
    L : array_like
        ``(n,)`` radii in Å.
    G : array_like
        ``(n,)`` running integral with the ``'kruger'`` weight.
    min_width, start : float
        Å.
    tail : float
        Fraction (0 to 1] of the points that may end a window.
    r2_threshold : float or None
        A RuntimeWarning when the best :math:`R^2` is below it (``kbkit``'s default 0.99
        raises there): :math:`G(L)` is not yet linear in :math:`1/L`, or too noisy. None:
        no warning (:func:`kirkwood_buff` warns once for all pairs instead).

    Returns
    -------
    tuple of float
        ``(Lmin, Lmax)``.
    """
    L = np.asarray(L, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    if L.ndim != 1 or G.shape != L.shape:
        raise ValueError(f"L and G must be 1-D arrays of one length, got {L.shape} and {G.shape}")
    if not 0 < tail <= 1:
        raise ValueError(f"tail must be in (0, 1], got {tail!r}")
    tol = 1e-9 * abs(L[-1])
    lo = min(float(start), L[-1] - float(min_width))
    valid = np.flatnonzero(L >= lo - tol)
    ends = valid[int((1 - tail) * len(valid)):]
    if len(ends) == 0:
        raise ValueError("select_fit_range: no point of L can end a window")
    y = L * G
    ok = np.isfinite(y)
    cx = np.concatenate([[0], np.cumsum(np.where(ok, L, 0))])
    cy = np.concatenate([[0], np.cumsum(np.where(ok, y, 0))])
    cxx = np.concatenate([[0], np.cumsum(np.where(ok, L * L, 0))])
    cyy = np.concatenate([[0], np.cumsum(np.where(ok, y * y, 0))])
    cxy = np.concatenate([[0], np.cumsum(np.where(ok, L * y, 0))])
    cbad = np.concatenate([[0], np.cumsum(~ok)])
    s, e = valid[:, None], ends[None, :]
    n = (e - s + 1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # e <= s: discarded below
        sx, sy = cx[e + 1] - cx[s], cy[e + 1] - cy[s]
        sxx = cxx[e + 1] - cxx[s] - sx * sx / n
        syy = cyy[e + 1] - cyy[s] - sy * sy / n
        sxy = cxy[e + 1] - cxy[s] - sx * sy / n
        r2 = sxy * sxy / (sxx * syy)
    width = L[e] - L[s]
    good = ((e > s) & (n >= 3) & (width >= min_width - tol) & (cbad[e + 1] == cbad[s])
            & np.isfinite(r2))
    if not good.any():
        raise ValueError(f"select_fit_range: no window of at least {min_width} Å and 3 points "
                         f"ends in the last {tail:.0%} of L (L from {L[0]} to {L[-1]} Å)")
    best = np.max(r2[good])
    if r2_threshold is not None and best < r2_threshold:
        warnings.warn(f"select_fit_range: the best window has R^2 = {best:.4f} < "
                      f"{r2_threshold}: L G(L) is not linear there (not converged, or noisy)",
                      RuntimeWarning, stacklevel=_user_stacklevel())
    near = good & (r2 >= best - 1e-3)
    i, j = np.unravel_index(np.argmax(np.where(near, width + 1e-12 * r2, -np.inf)), r2.shape)
    return float(L[valid[i]]), float(L[ends[j]])


# -- the whole chain for one or more pairs ---------------------------------------------------
def _route(fit_range, window):
    """How the window of a fit was chosen, in the caller's words."""
    if fit_range is None:
        return (f"the default window fit_range=None (the outer half, {window[0]:g}-"
                f"{window[1]:g} Å)")
    if isinstance(fit_range, str):
        return f"fit_range='auto' (its best window, {window[0]:g}-{window[1]:g} Å)"
    return f"fit_range=({window[0]:g}, {window[1]:g})"


def _poor_fit_message(r2, windows, fit_range, r2_threshold, labels=None, where="kirkwood_buff"):
    r"""The warning of extrapolations whose :math:`R^2` is below `r2_threshold`, or None.

    Parameters
    ----------
    r2 : array_like
        ``(n,)`` :math:`R^2` of the line :math:`L\,G(L)` of each fit (NaN: no fit).
    windows : array_like
        ``(n, 2)`` the windows used, Å.
    fit_range : tuple, 'auto' or None
        As given by the user (names the route in the message).
    r2_threshold : float
        The threshold.
    labels : list of str, optional
        A name per fit (default ``pair k``).
    where : str
        Who speaks.
    """
    r2 = np.atleast_1d(np.asarray(r2, dtype=np.float64))
    windows = np.asarray(windows, dtype=np.float64).reshape(-1, 2)
    bad = np.flatnonzero(np.isfinite(r2) & (r2 < r2_threshold))
    if not len(bad):
        return None
    labels = [f"pair {k}" for k in range(len(r2))] if labels is None else list(labels)
    shown = "; ".join(f"{labels[k]}: R^2 = {r2[k]:.3f} over {_route(fit_range, windows[k])}"
                      for k in bad[:6])
    more = f" (and {len(bad) - 6} more)" if len(bad) > 6 else ""
    return (f"{where}: the extrapolation of L G(L) = G L + F is a poor fit, R^2 below "
            f"{r2_threshold}: {shown}{more}. G(L) is not yet linear in 1/L there (the RDF "
            f"has not converged, or is noisy), so G is uncertain beyond its stderr: plot "
            f"L G(L) against L (kb_L * kb_running), run more frames, or choose the window "
            f"(fit_range=(Lmin, Lmax), or 'auto'); r2_threshold=None silences this")


def kirkwood_buff(edges, rdf, *, n_b=None, volume=None, delta=0.0, correction="gv",
                  weight="kruger", fit_range=None, integration="histogram",
                  r2_threshold=R2_THRESHOLD):
    r"""KB integrals of one or more pairs: correction, running integral, thermodynamic limit.

    1. ``correction='gv'``: :math:`g \to g^\mathrm{GV}` (:func:`ganguly_van_der_vegt`);
       ``'none'``: :math:`g` as given.
    2. :math:`G(L)` with the `weight` (:func:`running_kb`).
    3. :math:`G^\infty`: with ``weight='kruger'`` the slope of :math:`L\,G(L)` over
       `fit_range` (:func:`extrapolate`); with ``'none'``, ``'u1'`` or ``'u2'`` the mean of
       :math:`G(L)` over `fit_range` (the direct estimates of Krüger and Vlugt 2018).

    Parameters
    ----------
    edges : array_like
        Bin edges in Å, from 0.
    rdf : array_like
        ``(..., nbins)`` :math:`g_{ab}` in the KB convention (:func:`rdf_from_counts`).
    n_b, volume, delta :
        :math:`N_b`, the mean box volume (Å³) and :math:`\delta_{ab}` of
        :func:`ganguly_van_der_vegt` (needed for ``correction='gv'``).
    correction : {'gv', 'none'}
    weight : {'kruger', 'none', 'u1', 'u2'}
    fit_range : tuple of float, 'auto' or None
        ``(Lmin, Lmax)`` in Å; ``'auto'``: :func:`select_fit_range` for each pair (with
        ``'kruger'``); None (default): the outer half, :math:`(r_\mathrm{max}/2,
        r_\mathrm{max})` with :math:`r_\mathrm{max}` the last edge.
    integration : {'histogram', 'trapezoid'}
        See :func:`running_kb`.
    r2_threshold : float or None
        With ``weight='kruger'``, one RuntimeWarning for all the pairs whose line
        :math:`L\,G(L)` has :math:`R^2` below it, whatever chose the window (default
        :data:`R2_THRESHOLD` = 0.99, ``kbkit``'s); None: no warning. The other weights
        average :math:`G(L)` and have no :math:`R^2` (``r2`` is NaN): check ``rms``.

    Returns
    -------
    Results
        ``L`` (Å), ``rdf`` (the :math:`g` integrated), ``running`` (:math:`G(L)`, Å³),
        ``kb`` (:math:`G^\infty`, Å³), ``surface`` (:math:`F^\infty`, Å⁴; NaN without a
        fit), ``r2``, ``rms`` (Å³: residual of the line, or the standard deviation of
        :math:`G` over the window without a fit), ``stderr`` (Å³), ``fit_range``
        (``(..., 2)``, Å).
    """
    edges = _check_edges(edges)
    rdf = _check_rdf(rdf, edges)
    correction = _choice(correction, _CORRECTIONS, "correction")
    weight = _choice(weight, tuple(WEIGHTS), "weight")
    integration = _choice(integration, _INTEGRATIONS, "integration")
    if correction == "gv":
        if n_b is None or volume is None:
            raise ValueError("correction='gv' needs n_b (molecules of b) and volume (mean box "
                             "volume, Å³)")
        rdf = ganguly_van_der_vegt(edges, rdf, n_b, volume, delta, integration)
    L, G = running_kb(edges, rdf, weight, integration)
    lead = G.shape[:-1]
    rows = G.reshape(-1, len(L))
    if fit_range is None:
        windows = [(edges[-1] / 2, edges[-1])] * len(rows)
    elif isinstance(fit_range, str):
        if fit_range != "auto":
            raise ValueError(f"fit_range must be (Lmin, Lmax), 'auto' or None, got {fit_range!r}")
        if weight != "kruger":
            raise ValueError("fit_range='auto' chooses a window for the extrapolation of the "
                             "'kruger' weight; give (Lmin, Lmax) for the other weights")
        # a pair without data (NaN, e.g. one atom with itself) keeps the default window
        windows = [select_fit_range(L, row, r2_threshold=None) if np.all(np.isfinite(row))
                   else (edges[-1] / 2, edges[-1]) for row in rows]
    else:
        windows = [fit_range] * len(rows)
    out = {k: np.full(len(rows), np.nan) for k in ("kb", "surface", "r2", "rms", "stderr")}
    used = np.full((len(rows), 2), np.nan)
    for i, (row, window) in enumerate(zip(rows, windows)):
        if weight == "kruger":
            fit = extrapolate(L, row, window, edges[-1])
            for k, arr in out.items():
                arr[i] = fit[k]
            used[i] = fit.fit_range
        else:
            mask = _window(L, window, edges[-1])
            out["kb"][i] = row[mask].mean()
            out["rms"][i] = row[mask].std()
            out["stderr"][i] = row[mask].std(ddof=1) / np.sqrt(mask.sum())
            used[i] = L[mask][[0, -1]]
    if weight == "kruger" and r2_threshold is not None:
        message = _poor_fit_message(out["r2"], used, fit_range, r2_threshold)
        if message is not None:
            warnings.warn(message, RuntimeWarning, stacklevel=_user_stacklevel())
    res = Results(L=L, rdf=rdf, running=G, fit_range=used.reshape(lead + (2,)))
    for k, v in out.items():
        res[k] = v.reshape(lead)
    return res


def _excluded_pairs(values_a, values_b):
    """Pairs (i in a, j in b) with equal values."""
    ua, ca = np.unique(values_a, return_counts=True)
    ub, cb = np.unique(values_b, return_counts=True)
    _, ia, ib = np.intersect1d(ua, ub, return_indices=True)
    return int((ca[ia] * cb[ib]).sum())


def pair_kirkwood_buff(rdf, *, n_b=None, volume=None, delta=None, **options):
    r"""KB integrals of one pair from an ``InterRDF``, or from any results with
    ``edges`` and ``rdf``.

    With an ``InterRDF`` (this package's or MDAnalysis's, run with ``norm='rdf'`` and
    ``range`` from 0) the RDF is rebuilt in the KB convention from its counts
    (:func:`rdf_from_counts`): :math:`N_b` is ``len(g2)``, the volume the mean box volume
    of the run, the self pairs (``g1`` with ``g1`` without exclusions) are taken out, and
    :math:`\delta_{ab}` is the number of pairs that were never counted (self pairs,
    ``exclusion_block``, ``exclude_same``) per atom of ``g1``.

    Anything else must have ``edges`` and ``rdf`` (attributes or keys, or a ``results``
    holding them) with the RDF already in the KB convention; then `n_b`, `volume` and
    `delta` (the Kronecker delta of the two species) are needed for the correction.

    Parameters
    ----------
    rdf : InterRDF, Results or mapping
    n_b, volume, delta : optional
        Override (or supply) :math:`N_b`, the mean box volume in Å³ and
        :math:`\delta_{ab}`.
    **options
        ``correction``, ``weight``, ``fit_range``, ``integration``, ``r2_threshold`` of
        :func:`kirkwood_buff`.

    Returns
    -------
    Results
        As :func:`kirkwood_buff`, for the one pair.

    Examples
    --------
    ::

        rdf = InterRDF(water_o, water_o, nbins=150, range=(0, 15)).run()
        kb = pair_kirkwood_buff(rdf)
        kb.kb          # G_OO in Å³ (extrapolated)
    """
    res = getattr(rdf, "results", rdf)
    if hasattr(rdf, "g1") and hasattr(rdf, "g2") and hasattr(rdf, "n_frames"):
        if "edges" not in res or "count" not in res:
            raise ValueError("rdf: run the InterRDF before computing KB integrals")
        g1, g2 = rdf.g1, rdf.g2
        vol_cum = res.get("volume_cum", getattr(rdf, "volume_cum", None))
        if volume is None:
            if vol_cum is None:
                raise ValueError("rdf: this InterRDF has no box volume (run it with "
                                 "norm='rdf' and a periodic box) and no volume was given")
            volume = float(vol_cum) / rdf.n_frames
        n_self = 0
        block = getattr(rdf, "_exclusion_block", None)
        same_attr = getattr(rdf, "exclude_same", None)
        if block is not None:
            excluded = int(len(g1) // block[0] * block[0] * block[1])
        elif same_attr is not None:
            attr = EXCLUDE_SAME.get(same_attr, same_attr)
            excluded = _excluded_pairs(getattr(g1, attr), getattr(g2, attr))
        else:
            n_self = excluded = len(np.intersect1d(g1.ix, g2.ix))
        edges = np.asarray(res["edges"], dtype=np.float64)
        if n_self and edges[0] != 0:
            raise ValueError("rdf: the histogram must start at 0 Å (range=(0, rmax))")
        count = np.asarray(res["count"], dtype=np.float64)
        g = rdf_from_counts(count, edges, rdf.n_frames, volume, len(g1), len(g2), n_self)
        n_b = len(g2) if n_b is None else n_b
        delta = excluded / len(g1) if delta is None else delta
    else:
        def get(name):
            for src in (res, rdf):
                if isinstance(src, dict) and name in src:
                    return src[name]
                if hasattr(src, name):
                    return getattr(src, name)
            raise ValueError(f"rdf: no {name!r} in {type(rdf).__name__}; pass an InterRDF or "
                             f"results with 'edges' and 'rdf'")
        edges, g = get("edges"), get("rdf")
        delta = 0.0 if delta is None else delta
    return kirkwood_buff(edges, g, n_b=n_b, volume=volume, delta=delta, **options)


# -- binary mixtures --------------------------------------------------------------------------
def excess_coordination_numbers(kb, density):
    r"""Excess coordination numbers :math:`N_{ab} = \rho_b G_{ab}`.

    The excess (over a uniform distribution at the mean density) number of :math:`b`
    molecules around an :math:`a` molecule in the whole correlation volume (Ben-Naim,
    *Molecular Theory of Solutions*, Oxford University Press (2006)).

    Parameters
    ----------
    kb : array_like
        ``(..., n, n)`` :math:`G_{ab}` in Å³.
    density : array_like
        ``(..., n)`` number densities :math:`\rho_b` in Å⁻³.

    Returns
    -------
    numpy.ndarray
        ``(..., n, n)`` :math:`N_{ab}` (row :math:`a`, column :math:`b`).
    """
    kb = np.asarray(kb, dtype=np.float64)
    density = np.asarray(density, dtype=np.float64)
    if kb.ndim < 2 or kb.shape[-1] != kb.shape[-2] or density.shape[-1:] != kb.shape[-1:]:
        raise ValueError(f"kb must be (..., n, n) and density (..., n); got {kb.shape} and "
                         f"{density.shape}")
    return kb * density[..., None, :]


def binary_mixture(kb, density, temperature=None):
    r"""What Kirkwood–Buff theory gives for a binary mixture of species 1 and 2.

    With :math:`\Delta_{12} = G_{11} + G_{22} - 2G_{12}`,
    :math:`\eta = \rho_1 + \rho_2 + \rho_1\rho_2\Delta_{12}` and
    :math:`\zeta = 1 + \rho_1 G_{11} + \rho_2 G_{22} + \rho_1\rho_2(G_{11}G_{22} -
    G_{12}^2)` (Kirkwood and Buff, *J. Chem. Phys.* **19**, 774 (1951); Ben-Naim,
    *Molecular Theory of Solutions* (2006); Newman, *Chem. Soc. Rev.* **23**, 31 (1994)):

    .. math::

        \bar V_1 = \frac{1 + \rho_2 (G_{22} - G_{12})}{\eta},\qquad
        \bar V_2 = \frac{1 + \rho_1 (G_{11} - G_{12})}{\eta},\qquad
        \kappa_T k_B T = \frac{\zeta}{\eta},

    .. math::

        \left(\frac{\partial \ln\gamma_1}{\partial \ln x_1}\right)_{p,T}
        = -\frac{x_1 \rho_2 \Delta_{12}}{1 + x_1 \rho_2 \Delta_{12}}
        = \left(\frac{\partial \ln\gamma_2}{\partial \ln x_2}\right)_{p,T},

    the excess coordination numbers :math:`N_{ab} = \rho_b G_{ab}` and Ben-Naim's
    measures of preferential solvation :math:`\delta_1 = G_{11} - G_{12}` (positive: a
    molecule 1 sees more 1 than 2 beyond their mean densities) and
    :math:`\delta_2 = G_{22} - G_{12}`; :math:`\Delta_{12} = \delta_1 + \delta_2` vanishes
    for a symmetric ideal mixture.

    Parameters
    ----------
    kb : array_like
        ``(..., 2, 2)`` :math:`G_{ab}` in Å³.
    density : array_like
        ``(..., 2)`` :math:`\rho_1, \rho_2` in Å⁻³.
    temperature : float, optional
        K; gives :math:`\kappa_T` in Pa⁻¹.

    Returns
    -------
    Results
        ``mole_fraction`` (``(..., 2)``), ``excess_coordination`` (``(..., 2, 2)``),
        ``preferential_solvation`` (``(..., 2)``, Å³), ``delta_12`` (Å³), ``dlngamma``
        (:math:`\partial\ln\gamma_1/\partial\ln x_1`), ``partial_molar_volume``
        (``(..., 2)``, Å³ per molecule), ``compressibility_kT`` (:math:`\kappa_T k_B T`,
        Å³) and, with `temperature`, ``compressibility`` (:math:`\kappa_T`, Pa⁻¹).
    """
    kb = np.asarray(kb, dtype=np.float64)
    rho = np.asarray(density, dtype=np.float64)
    if kb.shape[-2:] != (2, 2) or rho.shape[-1:] != (2,):
        raise ValueError(f"binary_mixture needs kb of shape (..., 2, 2) and density (..., 2); "
                         f"got {kb.shape} and {rho.shape}")
    if np.any(rho <= 0):
        raise ValueError(f"density must be positive, got {density!r}")
    g11, g22 = kb[..., 0, 0], kb[..., 1, 1]
    g12 = 0.5 * (kb[..., 0, 1] + kb[..., 1, 0])
    r1, r2 = rho[..., 0], rho[..., 1]
    x1 = r1 / (r1 + r2)
    d12 = g11 + g22 - 2 * g12
    eta = r1 + r2 + r1 * r2 * d12
    zeta = 1 + r1 * g11 + r2 * g22 + r1 * r2 * (g11 * g22 - g12 * g12)
    res = Results(
        mole_fraction=np.stack([x1, 1 - x1], axis=-1),
        excess_coordination=excess_coordination_numbers(kb, rho),
        preferential_solvation=np.stack([g11 - g12, g22 - g12], axis=-1),
        delta_12=d12,
        dlngamma=-x1 * r2 * d12 / (1 + x1 * r2 * d12),
        partial_molar_volume=np.stack([(1 + r2 * (g22 - g12)) / eta,
                                       (1 + r1 * (g11 - g12)) / eta], axis=-1),
        compressibility_kT=zeta / eta,
    )
    if temperature is not None:
        t = float(_check_positive(temperature, "temperature"))
        res.compressibility = res.compressibility_kT * 1e-30 / (_K_B * t)
    return res


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
        rmin, rmax = self.rdf_settings["range"]
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
