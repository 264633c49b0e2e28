r"""The first coordination shell of g(r): :func:`first_shell` finds the first peak and the
first minimum after it, so that the noise of few frames does not fool it, and
:func:`running_coordination` gives the running coordination number n(r).
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

__all__ = ["FirstShell", "first_shell", "running_coordination"]


def running_coordination(count, n_frames, n_around):
    """Running coordination number: cumulative count per frame and per central atom."""
    return np.cumsum(count, axis=-1) / (n_frames * n_around)


class FirstShell(NamedTuple):
    """The first coordination shell found by :func:`first_shell`."""

    #: position of the first minimum of g(r) after the first peak (a bin centre), Å
    r_min: float
    #: running coordination number at ``r_min``
    coordination: float
    #: position and height of the first peak (bin centre, Å; g)
    r_peak: float
    g_peak: float
    #: g(r) at the minimum
    g_min: float
    #: bin of the minimum
    index: int


def _smoothed(values, smooth):
    """Centred moving average over ``2 * smooth + 1`` bins (fewer at the ends)."""
    if smooth == 0:
        return values
    kernel = np.ones(2 * smooth + 1)
    return (np.convolve(values, kernel, mode="same")
            / np.convolve(np.ones_like(values), kernel, mode="same"))


def _count_errors(bins, g, count):
    """Poisson standard errors of `g` from the pair counts of its bins.

    A bin of ``c > 0`` pairs has ``g / sqrt(c)``. A bin without pairs gets the g of one pair
    (its error could be one pair): the g of one pair, ``g / c`` of the bins that hold pairs,
    interpolated linearly in log-log over r (it goes as the inverse of the shell volume).
    """
    c = np.asarray(count, dtype=np.float64)
    if c.shape != g.shape or not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError(f"count must hold one non-negative number per bin (results.count); "
                         f"got shape {c.shape} for {g.shape[0]} bins")
    held = c > 0
    if not held.any():
        return np.zeros_like(g)
    per_pair = np.zeros_like(g)
    per_pair[held] = g[held] / c[held]
    if not held.all():
        r = np.log(np.maximum(bins, np.finfo(float).tiny))
        known = np.flatnonzero(held & (per_pair > 0))
        if known.size:
            per_pair[~held] = np.exp(np.interp(r[~held], r[known], np.log(per_pair[known])))
    return per_pair * np.sqrt(np.maximum(c, 1.0))


def _find_shell(g, err, first, last, z, prominence):
    """``(rise, peak, low, stop)`` bins of the rule of :func:`first_shell` on `g` with standard
    errors `err` over bins ``first..last``, or a string saying which step failed."""

    def stands_out(high, low):  # g[high] - g[low] is more than noise
        return g[high] - g[low] >= max(prominence, z * np.hypot(err[high], err[low]))

    above = g[first:last + 1] > 1.0
    rises = np.flatnonzero(above[1:] & ~above[:-1])
    if rises.size == 0:
        return "rise"
    rise = peak = k = first + 1 + int(rises[0])
    while k < last and not stands_out(peak, k):
        k += 1
        if g[k] > g[peak]:
            peak = k
    if not stands_out(peak, k):
        return "fall"
    low = k
    while k < last and not stands_out(k, low):
        k += 1
        if g[k] < g[low]:
            low = k
    if not stands_out(k, low):
        return "minimum"
    return rise, peak, low, k


#: half-widths (bins) of the moving averages that :func:`first_shell` tries in turn
_SMOOTHING_LADDER = (0, 1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64)


def first_shell(bins, rdf, coordination, *, count=None, z: float = 4.0,
                prominence: float = 0.05, smooth: int = 0, search=None) -> FirstShell:
    r"""The first peak and minimum of g(r) and the coordination number of the first shell.

    One rule, for the first peak and the first minimum alike, that the noise of a run of
    few frames or fine bins does not fool. A change of g between two bins *stands out*
    when it exceeds `prominence` and, with the pair counts `count`, `z` times its Poisson
    standard error (:math:`g_k / \sqrt{c_k}` in bin :math:`k` of :math:`c_k` pairs; a bin
    without pairs counts as one). On g(r) restricted to the bins whose centres lie in
    `search`:

    1. the *first peak* is the highest point from the first bin where g rises through 1
       (:math:`g_{k-1} \le 1 < g_k`; so the self pairs of a group with itself, at
       :math:`r = 0` in bin 0, are no peak) up to where g has fallen below it by a change
       that stands out;
    2. the *shell* ends where g, after the peak, has risen above its lowest point by a
       change that stands out;
    3. when no shell stands out, the same steps run on g(r) smoothed by centred moving
       averages of ``2 h + 1`` bins, for h = `smooth`, then 1, 2, 3, 4, 6, 8, 11, ... bins
       (the errors averaged with them), and the first h with a shell is taken;
    4. on g(r) smoothed over a tenth of the distance from the peak to the end of the shell
       (at least h bins), the first peak :math:`r_\mathrm{peak}` is the highest point
       before the shell's lowest, and the *first minimum* :math:`r_\mathrm{min}` the
       lowest point after it, before the end of the shell (the middle bin of a flat
       bottom, such as the empty bins after an O-H bond).

    Without `count` only `prominence` decides (and step 3 does not apply): pass
    ``results.count`` for noisy data (:meth:`InterRDF.first_shell` does). The
    coordination number is the running coordination number at :math:`r_\mathrm{min}`,

    .. math::

        n_\mathrm{coord} = n(r_\mathrm{min}) = \tfrac12\,\bigl(n(r_m^-) + n(r_m^+)\bigr),

    the linear interpolation, at the centre :math:`r_\mathrm{min}` of bin :math:`m`, of
    the running coordination number :math:`n(r)` known at the bin edges
    :math:`r_m^\pm` (``coordination[m]`` is :math:`n(r_m^+)`, 0 below the first bin).

    Parameters
    ----------
    bins : array_like
        Bin centres in Å, equally spaced (``results.bins``).
    rdf : array_like
        g(r) at `bins` (``results.rdf`` of ``norm='rdf'``).
    coordination : array_like
        Running coordination number at the upper bin edges (``results.coordination``).
    count : array_like, optional
        Independent pair counts of the bins (``results.count``; a group with itself counts
        each pair twice: pass half of it). Default: none, only `prominence` decides.
    z : float, optional
        How many standard errors a change must exceed to stand out. Default 4 (the rule
        compares hundreds of pairs of bins: at 4 noise alone rarely passes).
    prominence : float, optional
        The least change (in units of g) that stands out. Default 0.05.
    smooth : int, optional
        Half-width of the first moving average, in bins; 0 (default): none.
    search : tuple of float, optional
        ``(r_lo, r_hi)`` in Å: only bins with centres in this window are searched.

    Returns
    -------
    FirstShell
        ``r_min``, ``coordination``, ``r_peak``, ``g_peak``, ``g_min`` (g values of
        the unsmoothed `rdf`) and ``index`` (the bin of the minimum).

    Raises
    ------
    ValueError
        For arrays of different lengths, unequal bins, or when no peak above 1 or no
        minimum is found (the message says which, and what to change).

    Examples
    --------
    >>> import MDAnalysis as mda
    >>> from MDAnalysisTests.datafiles import TPR, XTC
    >>> from mdakit_fastrdf import InterRDF, first_shell
    >>> u = mda.Universe(TPR, XTC)
    >>> ow = u.select_atoms("name OW")
    >>> rdf = InterRDF(ow, ow, nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1)).run()
    >>> res = rdf.results
    >>> shell = first_shell(res.bins, res.rdf, res.coordination, count=res.count / 2)
    >>> 3.0 < shell.r_min < 4.0, 4.0 < shell.coordination < 5.0
    (True, True)
    """
    bins = np.asarray(bins, dtype=np.float64)
    g = np.asarray(rdf, dtype=np.float64)
    n = np.asarray(coordination, dtype=np.float64)
    if bins.ndim != 1 or g.shape != bins.shape or n.shape != bins.shape:
        raise ValueError(
            f"bins, rdf and coordination must be 1-D arrays of one value per bin; got shapes "
            f"{bins.shape}, {g.shape} and {n.shape} (for a SpeciesRDF pass one partial, "
            "e.g. results.rdf[k] and results.coordination[k])")
    if len(bins) < 3:
        raise ValueError(f"first_shell needs at least 3 bins, got {len(bins)}")
    width = np.diff(bins)
    if not np.all(np.isfinite(bins)) or not np.all(width > 0) or not np.allclose(
            width, width[0], rtol=1e-9, atol=0):
        raise ValueError("bins must be finite, increasing and equally spaced (results.bins)")
    if not np.all(np.isfinite(g)):
        raise ValueError("rdf holds NaN or infinite values")
    if isinstance(smooth, bool) or not isinstance(smooth, numbers.Integral) or smooth < 0:
        raise ValueError(f"smooth must be a non-negative integer (bins), got {smooth!r}")
    prominence = float(prominence)
    if not np.isfinite(prominence) or prominence <= 0:
        raise ValueError(f"prominence must be a positive number, got {prominence!r}")
    z = float(z)
    if not np.isfinite(z) or z < 0:
        raise ValueError(f"z must be a non-negative number (standard errors), got {z!r}")
    err = np.zeros_like(g) if count is None else _count_errors(bins, g, count)
    lo, hi = (-np.inf, np.inf) if search is None else (float(v) for v in search)
    if not lo < hi:
        raise ValueError(f"search must be (r_lo, r_hi) with r_lo < r_hi, got {search!r}")
    inside = np.flatnonzero((bins >= lo) & (bins <= hi))
    if inside.size == 0:
        raise ValueError(f"search={search!r} holds no bin centre ({bins[0]:g} to "
                         f"{bins[-1]:g} Å)")
    first, last = int(inside[0]), int(inside[-1])
    ladder = [int(smooth)] + [h for h in _SMOOTHING_LADDER if h > smooth]
    if count is None:
        ladder = ladder[:1]
    found = failed = None
    for h in ladder:
        if h > smooth and 2 * h + 1 > (last - first + 1) // 4:
            break  # (averages over more than a quarter of the bins: no shell)
        tried = h
        gs = _smoothed(g, h)
        es = np.sqrt(_smoothed(err ** 2, h) / (2 * h + 1)) if h else err
        found = _find_shell(gs, es, first, last, z, prominence)
        if not isinstance(found, str):
            break
        failed = failed or found  # what failed at the first smoothing
    if found is None or isinstance(found, str):
        if failed == "rise":
            raise ValueError(
                "no first peak: g(r) never rises through 1 in the bins searched; "
                "first_shell needs g(r) of norm='rdf' with a first coordination shell in its "
                "range")
        what = f"prominence={prominence:g}"
        advice = "extend range (rmax) or search, or lower prominence"
        if count is not None:
            what = (f"more than noise (z={z:g} standard errors of the pair counts, at least "
                    f"{what}; also on g(r) averaged over up to {2 * tried + 1} bins)")
            advice = ("extend range (rmax) or search; for noise, run more frames or use "
                      "wider bins (fewer nbins), or lower z")
        if failed == "fall":
            raise ValueError(
                f"no first peak: g(r) does not fall by {what} after its maximum within the "
                f"bins searched (up to {bins[last]:g} Å); {advice}")
        raise ValueError(
            f"no first minimum: after the first peak, g(r) does not rise again by {what} "
            f"within the bins searched (up to {bins[last]:g} Å); {advice}")
    rise, peak, low, stop = found
    located = _smoothed(g, max(h, int(round((stop - peak) / 10))))
    top = located[rise:low]
    tied = rise + np.flatnonzero(top >= top.max() * (1 - 1e-12))
    peak = int(tied[np.argmax(g[tied])])  # (a one-bin peak ties with its neighbour)
    bottom = located[peak + 1:stop]
    ties = np.flatnonzero(bottom == bottom.min())
    m = peak + 1 + int(ties[len(ties) // 2])
    below = n[m - 1] if m > 0 else 0.0
    return FirstShell(r_min=float(bins[m]), coordination=float(0.5 * (below + n[m])),
                      r_peak=float(bins[peak]), g_peak=float(g[peak]), g_min=float(g[m]),
                      index=int(m))
