r"""The self parts of time correlations, compiled for the CPU: for the lags :math:`\tau` and
the time origins :math:`t_0`, the lengths of the displacements

.. math::

    d_i(t_0) = |\mathbf{r}_i(t_0 + \tau) - \mathbf{r}_i(t_0)|

of every atom (float64, from positions made whole across the box), histogrammed per species
(the van Hove self part) or summed as :math:`\sin(q d)/(q d)` (the self intermediate
scattering function).

The work is one pass over two frames' positions per origin and lag, threads taking every
n-th origin. For the histogram, the lengths and their bins are one vectorised loop (the
bin is the integer part of the length in bins, unless that lies within rounding of an
edge, where the edges themselves decide), then one increment a displacement: ~5.1 ns a
displacement on one core of the 2-core development machine, against ~50 ns for NumPy's
norm and histogram. The sinc sums use a vectorised sine without branches (a library sine
branches on the argument's range, and random lengths mispredict those branches: 22 ns a
value there, 4.7 ns here), within 4 units in the last place of NumPy's (tested);
``benchmarks/bench_van_hove.py``, ``benchmarks/NOTES.md``. The counts are integers; the
sinc sums are added per origin over the atoms in a fixed order and then over the origins
in order, so neither depends on the number of threads.
:func:`unwrap` makes positions whole in compiled code, threads over ranges of atoms.
"""

from __future__ import annotations

import numpy as np

from . import _cpu_module

__all__ = ["displacement_histogram", "sinc_sums", "unwrap"]


def _args(positions, origins, lags, species):
    pos = np.ascontiguousarray(positions, dtype=np.float64)
    t0 = np.ascontiguousarray(origins, dtype=np.int64).reshape(-1)
    tau = np.ascontiguousarray(lags, dtype=np.int64).reshape(-1)
    sp = np.ascontiguousarray(species, dtype=np.int32)
    return pos, t0, tau, sp


def displacement_histogram(positions, origins, lags, species, n_species, edges, out,
                           n_threads=None):
    """Add to `out` (int64 ``(n_species, n_lags, nbins)``, C-contiguous) the counts of the
    displacement lengths of every origin :math:`t_0` and lag :math:`\tau` with
    :math:`t_0 + \tau` a frame of `positions`, binned as :func:`numpy.histogram` bins the
    equal bins of `edges` (the last bin closed; lengths outside not counted).

    Parameters
    ----------
    positions : array_like, (F, N, 3)
        Positions made whole (float64).
    origins : array_like of int
        The frames :math:`t_0`, increasing.
    lags : array_like of int
        The lags :math:`\tau`, increasing.
    species : array_like of int, (N,)
        Species of each atom, ``0 .. n_species - 1``.
    n_threads : int, optional
        CPU threads (None: all the process may use).
    """
    pos, t0, tau, sp = _args(positions, origins, lags, species)
    _cpu_module().displacement_histogram(pos, t0, tau, sp, int(n_species),
                                         np.ascontiguousarray(edges, dtype=np.float64), out,
                                         int(n_threads or 0))


def sinc_sums(positions, origins, lags, species, n_species, q, n_threads=None) -> np.ndarray:
    r"""``(n_species, n_lags, len(q))``: the sums over the origins (with
    :math:`t_0 + \tau` a frame) and over each species' atoms of :math:`\sin(q d)/(q d)`
    (1 at :math:`d = 0`); arguments as for :func:`displacement_histogram`."""
    pos, t0, tau, sp = _args(positions, origins, lags, species)
    return _cpu_module().sinc_sums(pos, t0, tau, sp, int(n_species),
                                   np.ascontiguousarray(q, dtype=np.float64), int(n_threads or 0))


def unwrap(positions, boxes, inverses, n_threads=None):
    r"""Positions made whole from consecutive frames: ``(out, longest)``, `out` the
    ``(F, N, 3)`` float64 positions, `longest` ``(F,)`` the longest minimum-image step into
    each frame (0 for the first), which the caller checks.

    Each step :math:`\mathbf{d} = \mathbf{r}_t - \mathbf{r}_{t-1}` (float64) becomes
    :math:`[\mathbf{f} - \mathrm{round}(\mathbf{f})] H_t` with
    :math:`\mathbf{f} = \mathbf{d} H_t^{-1}` (round half to even, as :func:`numpy.round`),
    accumulated from the first frame.

    Parameters
    ----------
    positions : array_like, (F, N, 3)
        float32 (read as it is) or any real type (as float64).
    boxes, inverses : array_like, (F, 3, 3)
        Each frame's box (rows a, b, c) and its inverse.
    n_threads : int, optional
        CPU threads, over ranges of atoms (None: all the process may use).
    """
    pos = np.asarray(positions)
    if not (pos.dtype == np.float32 and pos.flags.c_contiguous):
        pos = np.ascontiguousarray(pos, dtype=np.float64)
    return _cpu_module().unwrap(pos, np.ascontiguousarray(boxes, dtype=np.float64),
                                np.ascontiguousarray(inverses, dtype=np.float64),
                                int(n_threads or 0))
