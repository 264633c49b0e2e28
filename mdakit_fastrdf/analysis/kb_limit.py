r"""Kirkwood–Buff integrals, the fit: the extrapolation of :math:`G_{ab}(L)` to the
thermodynamic limit with its statistics, the choice of the fit range, and the whole chain
for one pair (:func:`kirkwood_buff`, :func:`pair_kirkwood_buff`)."""

from __future__ import annotations

import warnings

import numpy as np
from MDAnalysis.analysis.results import Results

from .docstrings import render_docs
from .checks import EXCLUDE_SAME, _user_stacklevel
from .kb_integrals import (
    _CORRECTIONS,
    _INTEGRATIONS,
    R2_THRESHOLD,
    WEIGHTS,
    _check_edges,
    _check_rdf,
    _choice,
    ganguly_van_der_vegt,
    rdf_from_counts,
    running_kb,
)


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


@render_docs
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
    ${EDGES_KB_RDF}
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
