r"""Plots of the results of any analysis of the package (needs matplotlib).

:func:`plot` draws :class:`~mdakit_fastrdf.InterRDF`, :class:`~mdakit_fastrdf.SpeciesRDF` and
:class:`~mdakit_fastrdf.InterRDF_s` results (after :meth:`run`, or read back by
:func:`mdakit_fastrdf.load`) on a matplotlib Axes and returns it; the analyses and
:class:`~mdakit_fastrdf.RDFData` have the same helper as a ``plot()`` method.

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
#: Above this many site pairs, InterRDF_s plots the mean of each pair of groups by default.
MAX_SITE_LINES = 20


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


def _band(ax, x, y, sem, color, errors):
    if errors and sem is not None:
        ax.fill_between(x, y - sem, y + sem, color=color, alpha=0.25, linewidth=0, step=None)


def _sem_of_blocks(values):
    values = np.asarray(values, dtype=np.float64)
    return values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])


def plot(obj, ax=None, *, pairs=None, sites=None, total=False, coordination=False,
         errors=True, label=None, legend=True, **line_kwargs):
    """Plot RDFs (and coordination numbers) of an analysis or of loaded results.

    Parameters
    ----------
    obj : InterRDF, SpeciesRDF, InterRDF_s or RDFData
        An analysis after :meth:`run`, or what :func:`mdakit_fastrdf.load` returned.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure).
    pairs : list of tuple, optional
        SpeciesRDF: the species pairs to draw, e.g. ``[("O", "O"), ("O", "H")]`` (default:
        every partial).
    sites : list of tuple, optional
        InterRDF_s: ``(k, i, j)`` site pairs to draw (pair of groups `k`, atom `i` of its
        first group, atom `j` of its second). Default: every site pair when there are at
        most 20, otherwise the mean over the site pairs of each pair of groups.
    total : bool, optional
        SpeciesRDF: also draw the total RDF (``results.total_rdf``).
    coordination : bool, optional
        Also draw the running coordination number (dashed, on a second y axis on the
        right, ``ax.figure.axes[-1]``); see the module notes for its definition.
    errors : bool, optional
        Shade :math:`\\pm` one standard error where the run had ``blocks`` (default True).
    label : str, optional
        Legend label of the line (InterRDF); SpeciesRDF and InterRDF_s label their lines
        by species or site.
    legend : bool, optional
        Draw a legend when there is more than one line or a `label`.
    **line_kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot` for every line.

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
    from .io import _as_data, _pair_index, _species_index

    data = _as_data(obj)
    res, params = data.results, data.parameters
    norm = params["norm"]
    n_frames = data.n_frames
    ax = _axes(ax)
    x = np.asarray(res.bins)
    lines = []  # (label, y, sem, coordination, coordination_sem)

    if data.analysis == "InterRDF":
        sem = res.get("rdf_sem")
        n_a = params["n_atoms1"]
        cn = np.cumsum(res.count) / (n_frames * n_a)
        cn_sem = None
        if "block_count_uint64" in res:
            per_block = (np.cumsum(res.block_count_uint64.astype(np.float64), axis=-1)
                         / (res.block_n_frames[:, None] * n_a))
            cn_sem = _sem_of_blocks(per_block)
        lines.append((label, res.rdf, sem, cn, cn_sem))
    elif data.analysis == "SpeciesRDF":
        species = list(res.species)
        if pairs is None:
            rows = list(range(len(res.pairs)))
        else:
            rows = [_pair_index(res.pairs, _species_index(species, a), _species_index(species, b))
                    for a, b in pairs]
        for n, k in enumerate(rows):
            a, b = res.pairs[k]
            if pairs is not None:  # keep the order the user asked for: b around a
                ia, ib = (_species_index(species, pairs[n][0]), _species_index(species, pairs[n][1]))
            else:
                ia, ib = int(a), int(b)
            text = f"{species[ia]}–{species[ib]}"
            cn = np.asarray(res.cdf[k]) / res.n_atoms[ia]
            cn_sem = None
            if "block_cdf" in res:
                cn_sem = _sem_of_blocks(res.block_cdf[:, k] / res.n_atoms[ia])
            sem = res.rdf_sem[k] if "rdf_sem" in res else None
            lines.append((text, res.rdf[k], sem, cn, cn_sem))
        if total:
            if "total_rdf" not in res:
                raise ValueError("total=True: these results have no total RDF (the species "
                                 "overlap)")
            lines.append(("total", res.total_rdf, res.get("total_rdf_sem"), None, None))
    elif data.analysis == "InterRDF_s":
        counts = res.count
        n_sites = sum(int(np.prod(c.shape[:2])) for c in counts)
        if sites is None and n_sites > MAX_SITE_LINES:
            for k, count in enumerate(counts):
                y = np.asarray(res.rdf[k]).mean(axis=(0, 1))
                sem = None
                if "block_rdf" in res:
                    sem = _sem_of_blocks(np.asarray(res.block_rdf[k]).mean(axis=(1, 2)))
                cn = np.cumsum(count.sum(axis=1), axis=-1).mean(axis=0) / n_frames
                lines.append((f"groups {k}: mean of {count.shape[0]}×{count.shape[1]} sites",
                              y, sem, cn, None))
        else:
            if sites is None:
                sites = [(k, i, j) for k, c in enumerate(counts)
                         for i in range(c.shape[0]) for j in range(c.shape[1])]
            for k, i, j in sites:
                idx_i = int(np.asarray(res.indices[k][0])[i])
                idx_j = int(np.asarray(res.indices[k][1])[j])
                sem = res.rdf_sem[k][i, j] if "rdf_sem" in res else None
                cn = np.cumsum(counts[k][i, j]) / n_frames
                lines.append((f"{k}: atoms {idx_i}–{idx_j}", res.rdf[k][i, j], sem, cn, None))
    else:  # pragma: no cover - RDFData checks the name
        raise TypeError(f"cannot plot {data.analysis} results")

    twin = ax.twinx() if coordination else None
    for text, y, sem, cn, cn_sem in lines:
        y = np.asarray(y, dtype=np.float64)
        color = "black" if text == "total" else None
        kwargs = dict(line_kwargs)
        if color and "color" not in kwargs:
            kwargs["color"] = color
        (line,) = ax.plot(x, y, label=text, **kwargs)
        _band(ax, x, y, None if sem is None else np.asarray(sem), line.get_color(), errors)
        if twin is not None and cn is not None:
            cn = np.asarray(cn, dtype=np.float64)
            twin.plot(x, cn, linestyle="--", color=line.get_color(), linewidth=1.0)
            _band(twin, x, cn, cn_sem, line.get_color(), errors)
    if norm == "rdf":
        ax.axhline(1.0, color="0.6", linewidth=0.8, linestyle=":")
    ax.set_xlabel("r (Å)")
    ax.set_ylabel(_YLABEL[norm])
    ax.set_xlim(res.edges[0], res.edges[-1])
    if twin is not None:
        twin.set_ylabel("coordination number (dashed)")
        twin.set_ylim(bottom=0)
    if legend and (len(lines) > 1 or label):
        ax.legend(fontsize="small", ncol=2 if len(lines) > 8 else 1, frameon=False)
    return ax
