r"""The shells and their normalisation: spherical shell volumes, ``numpy.histogram``'s
edges, and the normalisations of MDAnalysis's ``InterRDF`` that every analysis shares
(:func:`normalise_counts`)."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["histogram_edges", "normalise_counts", "shell_volumes"]


def shell_volumes(edges):
    r"""Volumes :math:`\frac{4}{3}\pi(r_{k+1}^3 - r_k^3)` of the spherical shells of ``edges``
    (computed as MDAnalysis does)."""
    vols = np.power(edges, 3)
    return 4 / 3 * np.pi * np.diff(vols)


@functools.lru_cache(maxsize=64)
def _bin_edges(nbins, rmin, rmax):
    edges = np.histogram_bin_edges([-1], bins=nbins, range=(rmin, rmax))
    edges.setflags(write=False)
    return edges


def histogram_edges(nbins, rng):
    """``numpy.histogram``'s edges (as MDAnalysis builds them) and the bin centres
    (``numpy.histogram_bin_edges``: the same function of NumPy computes both; kept for the
    last few ranges, ~30-60 µs a run)."""
    rmin, rmax = rng
    edges = _bin_edges(nbins, rmin, rmax).copy()
    return edges, 0.5 * (edges[:-1] + edges[1:])


def normalise_counts(count, norm, n_frames, edges, volume_cum=None, n_pairs=1):
    r"""The histogram `count` (bins last) normalised as MDAnalysis's ``InterRDF`` does.

    .. math::

        g_\mathrm{rdf}(r_k) = \frac{n_k}{N_\mathrm{frames}\, V_k\, N_\mathrm{pairs} /
        \langle V \rangle}, \qquad
        g_\mathrm{density}(r_k) = \frac{n_k}{N_\mathrm{frames}\, V_k}, \qquad
        g_\mathrm{none}(r_k) = \frac{n_k}{N_\mathrm{frames}}

    with :math:`V_k` the shell volumes (:func:`shell_volumes`) and :math:`\langle V \rangle =`
    ``volume_cum / n_frames``. `n_pairs` is a number or one number per leading row of
    `count`. The operations are MDAnalysis's, in its order, so the values are its bit for
    bit.
    """
    factor = n_frames
    if norm in ("rdf", "density"):
        factor = factor * shell_volumes(edges)
    if norm == "rdf":
        box_vol = volume_cum / n_frames
        n_pairs = np.asarray(n_pairs, dtype=np.float64)
        factor = factor * ((n_pairs[..., None] if n_pairs.ndim else n_pairs) / box_vol)
    return count / factor
