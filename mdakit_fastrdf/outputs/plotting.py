r"""Plots of the results of any analysis of the package (needs matplotlib).

:func:`plot` draws the results of any analysis (after :meth:`run`, or read back by
:func:`mdakit_fastrdf.load`) on a matplotlib Axes and returns it; the analyses and
:class:`~mdakit_fastrdf.RDFData` have the same helper as a ``plot()`` method. What is drawn
comes from the analysis (its ``_curves``: one line per partial, per site pair, ...); this
module only draws lines, error bands and the coordination axis.

The running coordination number of B atoms around an A atom is

.. math::

    n_{AB}(r_k) = \frac{1}{N_\mathrm{frames} N_A} \sum_{k' \le k} c_{k'}

with :math:`c_k` the pair count of bin :math:`k` summed over the frames
(``results.count``) and :math:`N_A` the atoms of the first group (``g1``, or species
:math:`a`). It is meaningful for pairs of distinct atoms: exclude self pairs
(``exclusion_block=(1, 1)`` or ``exclude_self=True``) when the groups are the same.
After a run with ``blocks`` the shaded bands are :math:`\pm` one standard error of the
block mean (:ref:`block-averaging`).
"""

from __future__ import annotations

import numpy as np

from ..analysis.declarations import provides_output
from .data import _as_data

__all__ = ["plot"]

_YLABEL = {"rdf": "g(r)", "density": "ρ(r) (Å$^{-3}$)", "none": "n(r) (pairs per frame)"}


def _axes(ax):
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "plotting needs matplotlib: pip install matplotlib (or pip install "
            "\"mdakit_fastrdf[plot]\")"
        ) from None
    _, ax = plt.subplots(figsize=(6.0, 4.0), layout="constrained")
    return ax


def _plot_axes(cls, res, params):
    """The analysis' :class:`PlotAxes` (its ``_plot_axes``, unless it returns None), else
    g(r)-like axes over the bin centres labelled by the run's ``norm``."""
    from ..analysis.declarations import PlotAxes

    own = getattr(cls, "_plot_axes", None)
    axes = None if own is None else own(res, params)
    if axes is not None:
        return axes
    norm = params["norm"]
    return PlotAxes(x=res.bins, xlabel="r (Å)", ylabel=_YLABEL[norm],
                    xlim=(res.edges[0], res.edges[-1]),
                    reference=1.0 if norm == "rdf" else None)


def _band(ax, x, y, sem, color, errors):
    """Shade y ± sem; True when a band was drawn."""
    if errors and sem is not None:
        ax.fill_between(x, y - sem, y + sem, color=color, alpha=0.25, linewidth=0, step=None)
        return True
    return False


def _finite_range(values):
    values = np.concatenate([np.ravel(v) for v in values]) if values else np.empty(0)
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else None


def _limit_y(ax, axes, drawn):
    """Choose the y limits from the curves within ``axes.ylim_from`` (a ``(lo, hi)`` x
    range); values outside it that would more than double the span are drawn off scale,
    and a note in the corner says how far they go."""
    lo_x, hi_x = axes.ylim_from
    inside, outside = [], []
    for cx, y, sem in drawn:
        keep = np.ones(cx.shape, dtype=bool)
        if lo_x is not None:
            keep &= cx >= lo_x
        if hi_x is not None:
            keep &= cx <= hi_x
        for part, mask in ((inside, keep), (outside, ~keep)):
            part.append(y[mask])
            if sem is not None:
                part.extend((y[mask] - sem[mask], y[mask] + sem[mask]))
    focus, rest = _finite_range(inside), _finite_range(outside)
    if focus is None:
        return
    lo, hi = focus
    if axes.reference is not None:
        lo, hi = min(lo, axes.reference), max(hi, axes.reference)
    span = max(hi - lo, 1e-12)
    if rest is not None:
        if rest[0] >= lo - span and rest[1] <= hi + span:  # close: show everything
            lo, hi = min(lo, rest[0]), max(hi, rest[1])
            span = hi - lo
        else:
            x_name, _, unit = axes.xlabel.partition(" (")
            unit = f" {unit.rstrip(')')}" if unit else ""
            where = (f"{x_name} < {lo_x:.2g}{unit}" if lo_x is not None else
                     f"{x_name} > {hi_x:.2g}{unit}")
            what = axes.ylabel.split(" (")[0]
            beyond = []
            if rest[1] > hi + span:
                beyond.append(f"up to {rest[1]:.3g}")
            if rest[0] < lo - span:
                beyond.append(f"down to {rest[0]:.3g}")
            ax.text(0.5, 0.97, f"off scale at {where}: {what} {' and '.join(beyond)}",
                    transform=ax.transAxes, ha="center", va="top", fontsize="small",
                    color="0.35")
    ax.set_ylim(lo - 0.08 * span, hi + 0.2 * span)


def _shell_limit(x, y, cn):
    """The top of the coordination axis: n(r) a little beyond the second minimum of g(r)
    (:func:`~mdakit_fastrdf.first_shell`'s rule, applied again after the first minimum,
    and at least 1.6 first-shell radii out), or at twice the first minimum; None when g(r)
    has no first shell."""
    from ..analysis.shells import first_shell

    try:
        first = first_shell(x, y, cn)
        second = first_shell(x, y, cn, search=(first.r_min + 1e-9 + (x[1] - x[0]),
                                                float(x[-1])))
        # a noise dip is no second shell: that lies at 1.6 first-shell radii or beyond
        r_end = max(second.r_min, 1.6 * first.r_min)
        n_end = float(np.interp(r_end, x, cn))
    except (ValueError, IndexError):
        try:
            first = first_shell(x, y, cn)
        except (ValueError, IndexError):
            return None
        r_end = 2.0 * first.r_min
        n_end = float(np.interp(r_end, x, cn))
    if not (np.isfinite(n_end) and n_end > 0) or r_end >= x[-1]:
        return None
    return 1.15 * n_end


@provides_output
def plot(obj, ax=None, *, coordination=False, errors=True, legend=True,
         coordination_label=None, **options):
    """Plot RDFs (and coordination numbers) of an analysis or of loaded results.

    Parameters
    ----------
    obj : InterRDF, SpeciesRDF, InterRDF_s, another analysis of the package, or RDFData
        An analysis after :meth:`run`, or what :func:`mdakit_fastrdf.load` returned.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure).
    coordination : bool, optional
        Also draw the running coordination number (dashed, on a second y axis on the
        right, ``ax.figure.axes[-1]``, whose label says what is counted around what); see
        the module notes for its definition. The right axis ends a little above n(r) at
        the second minimum of g(r) (where the first and second shells can be read; n(r)
        grows as :math:`r^3` beyond), or at twice the first minimum.
    coordination_label : str, optional
        What the coordination number counts, for the right axis' label (default: the
        analysis' wording, e.g. "second group's atoms around an atom of the first"; the
        command line says "-s2 atoms around an -s1 atom").
    errors : bool, optional
        Shade :math:`\\pm` one standard error where the run had ``blocks`` (default True);
        the legend names the band, and the curve (by its y label when it has no label).
    legend : bool, optional
        Draw a legend when there is more than one line or a `label`.
    **options
        What to draw, by analysis: ``label`` (InterRDF: the legend label of its line);
        ``pairs`` (SpeciesRDF: the species pairs, e.g. ``[("O", "O"), ("O", "H")]``,
        default every partial; an intra-species partial is drawn without its first bin
        when that bin holds the self pairs) and ``total`` (SpeciesRDF: also the total RDF);
        ``sites`` (InterRDF_s: ``(k, i, j)`` site pairs: pair of groups `k`, atom `i` of its
        first group, atom `j` of its second; default every site pair when there are at most
        20, else the mean over the site pairs of each pair of groups). Any other keyword is
        passed to :meth:`matplotlib.axes.Axes.plot` for every line.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes of the RDFs.

    Examples
    --------
    >>> rdf = InterRDF(ow, ow, exclusion_block=(1, 1)).run(blocks=5)  # doctest: +SKIP
    >>> ax = rdf.plot(coordination=True)  # doctest: +SKIP
    >>> ax.figure.savefig("rdf.png")  # doctest: +SKIP
    """
    import inspect

    data = _as_data(obj)
    res, params, cls = data.results, data.parameters, data.cls
    takes = inspect.signature(cls._curves).parameters
    curve_options = {k: options.pop(k) for k in list(options) if k in takes}
    curves = cls._curves(res, params, **curve_options)
    axes = _plot_axes(cls, res, params)
    ax = _axes(ax)
    x = np.asarray(axes.x)
    twin = ax.twinx() if coordination else None
    banded = False
    lines, drawn, cn_tops, cn_lines = [], [], [], []
    for curve in curves:
        y = np.asarray(curve.y, dtype=np.float64)
        kwargs = dict(options)
        if curve.color and "color" not in kwargs:
            kwargs["color"] = curve.color
        cx = x if curve.x is None else np.asarray(curve.x)
        try:
            (line,) = ax.plot(cx, y, label=curve.label, **kwargs)
        except AttributeError as exc:  # matplotlib's answer to an unknown keyword
            own = ", ".join(k for k in takes if k not in ("cls", "results", "parameters"))
            raise TypeError(
                f"plot(): {exc}; {data.analysis} results take the options {own or 'none'} "
                "and matplotlib's line properties") from None
        lines.append(line)
        sem = None if curve.sem is None else np.asarray(curve.sem, dtype=np.float64)
        drawn.append((cx, y, sem if errors else None))
        banded |= _band(ax, cx, y, sem, line.get_color(), errors)
        if twin is not None and curve.coordination is not None:
            cn = np.asarray(curve.coordination, dtype=np.float64)
            (cn_line,) = twin.plot(cx, cn, linestyle="--", color=line.get_color(),
                                   linewidth=1.0)
            cn_lines.append(cn_line)
            banded |= _band(twin, cx, cn, curve.coordination_sem, line.get_color(), errors)
            if params.get("norm") in ("rdf", "density") and curve.x is None:
                cn_tops.append(_shell_limit(cx, y, cn))
    if axes.reference is not None:
        ax.axhline(axes.reference, color="0.6", linewidth=0.8, linestyle=":")
    ax.set_xlabel(axes.xlabel)
    ax.set_ylabel(axes.ylabel)
    ax.set_yscale(axes.yscale)
    ax.set_xlim(*(axes.xlim if axes.xlim is not None else (x.min(), x.max())))
    if axes.ylim_from is not None and axes.yscale == "linear":
        _limit_y(ax, axes, drawn)
    if axes.title and not ax.get_title():
        ax.set_title(axes.title)
    if twin is not None:
        what = coordination_label or getattr(cls, "_coordination_label", None)
        twin.set_ylabel("coordination number n(r), dashed" + (f":\n{what}" if what else ""))
        tops = [t for t in cn_tops if t is not None]
        if tops and len(tops) == len(cn_lines):
            twin.set_ylim(0, max(tops))
        else:
            twin.set_ylim(bottom=0)
    labelled = [c for c in curves if c.label]
    if legend and (len(curves) > 1 or labelled or banded or cn_lines):
        if len(lines) == 1 and not labelled:  # name the one curve by what it is
            lines[0].set_label(axes.ylabel.split(" (")[0])
        handles, labels = ax.get_legend_handles_labels()
        if cn_lines:
            from matplotlib.lines import Line2D

            color = cn_lines[0].get_color() if len(cn_lines) == 1 else "0.3"
            handles.append(Line2D([], [], color=color, linestyle="--", linewidth=1.0))
            labels.append("n(r), right axis")
        if banded:
            from matplotlib.patches import Patch

            handles.append(Patch(color="0.5", alpha=0.25, linewidth=0))
            labels.append("± standard error (blocks)")
        if handles:
            ax.legend(handles, labels, fontsize="small", ncol=2 if len(curves) > 8 else 1,
                      frameon=False)
    return ax
