r"""Kirkwood–Buff integrals, the theory: the RDF in the KB convention, the
Ganguly–van der Vegt correction, the weights of a finite subvolume and the running
integrals :math:`G_{ab}(L)` (:mod:`.kirkwood_buff` gives the whole picture and the
analysis)."""

from __future__ import annotations

import numpy as np

from .docstrings import render_docs

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


@render_docs
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
    ${EDGES_KB_RDF}
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
@render_docs
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
    ${EDGES_RDF}
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


@render_docs
def running_kb(edges, rdf, weight="none", integration="histogram"):
    r"""Running KB integrals :math:`G(L)` at every bin.

    .. math::

        G(L) = \int_0^L \bigl(g(r) - 1\bigr)\, 4\pi r^2\, w(r/L)\, dr

    Parameters
    ----------
    ${EDGES_RDF}
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
