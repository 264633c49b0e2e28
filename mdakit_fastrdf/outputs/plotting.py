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
    """The analysis' :class:`PlotAxes` (its ``_plot_axes``), else g(r)-like axes over the
    bin centres labelled by the run's ``norm``."""
    from ..analysis.declarations import PlotAxes

    own = getattr(cls, "_plot_axes", None)
    if own is not None:
        return own(res, params)
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


def plot(obj, ax=None, *, coordination=False, errors=True, legend=True, **options):
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
        the module notes for its definition.
    errors : bool, optional
        Shade :math:`\\pm` one standard error where the run had ``blocks`` (default True);
        the legend names the band.
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

    from .io import _as_data

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
        sem = None if curve.sem is None else np.asarray(curve.sem)
        banded |= _band(ax, cx, y, sem, line.get_color(), errors)
        if twin is not None and curve.coordination is not None:
            cn = np.asarray(curve.coordination, dtype=np.float64)
            twin.plot(cx, cn, linestyle="--", color=line.get_color(), linewidth=1.0)
            banded |= _band(twin, cx, cn, curve.coordination_sem, line.get_color(), errors)
    if axes.reference is not None:
        ax.axhline(axes.reference, color="0.6", linewidth=0.8, linestyle=":")
    ax.set_xlabel(axes.xlabel)
    ax.set_ylabel(axes.ylabel)
    ax.set_yscale(axes.yscale)
    ax.set_xlim(*(axes.xlim if axes.xlim is not None else (x.min(), x.max())))
    if twin is not None:
        what = getattr(cls, "_coordination_label", None)
        twin.set_ylabel("coordination number (dashed)" + (f":\n{what}" if what else ""))
        twin.set_ylim(bottom=0)
    labelled = [c for c in curves if c.label]
    if legend and (len(curves) > 1 or labelled or banded):
        handles, labels = ax.get_legend_handles_labels()
        if banded:
            from matplotlib.patches import Patch

            handles.append(Patch(color="0.5", alpha=0.25, linewidth=0))
            labels.append("± standard error (blocks)")
        if handles:
            ax.legend(handles, labels, fontsize="small", ncol=2 if len(curves) > 8 else 1,
                      frameon=False)
    return ax
