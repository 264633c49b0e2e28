r"""Radial distribution functions on compiled pair-distance histogram kernels.

:class:`InterRDF` is a drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF`:
same parameters, defaults, results and errors; only the import line changes.
"""

from __future__ import annotations

import numbers

import numpy as np

from .base import PairHistogramBase, PairLayout
from .checks import EXCLUDE_SAME, check_atomgroup, check_exclude_same, check_norm
from .declarations import Curve, OutputSpec, Table, histogram_fields

__all__ = ["InterRDF"]

_DISTANCE_BACKENDS = ("serial", "openmp", "distopia")


def exclusion_labels(values_a, values_b, same):
    """Per-row int32 labels from the values of the two groups (equal values: pair
    excluded); one group's values when it is used with itself."""
    values = values_a if same else np.concatenate([values_a, values_b])
    _, codes = np.unique(values, return_inverse=True)
    return np.ascontiguousarray(codes.reshape(-1), dtype=np.int32)


def running_coordination(count, n_frames, n_around):
    """Running coordination number: cumulative count per frame and per central atom."""
    return np.cumsum(count, axis=-1) / (n_frames * n_around)


class InterRDF(PairHistogramBase):
    r"""Radial distribution function between two groups of atoms.

    A drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF`: it histograms the
    minimum-image distances between every atom of `g1` and every atom of `g2` in each frame,
    with the same parameters, defaults, results and normalisations, but in a compiled kernel
    (C++ with threads, SIMD and cache blocking on the CPU; CUDA on NVIDIA GPUs) instead of a neighbour search followed
    by :func:`numpy.histogram`.

    Parameters
    ----------
    g1 : AtomGroup
        First group of atoms.
    g2 : AtomGroup
        Second group of atoms (may be `g1` itself).
    nbins : int, optional
        Number of bins in the histogram. At most 4,000,000 (the kernels' limit; more is a
        ValueError). Histograms that do not fit in the available memory are a
        MemoryError with the size, raised before they are allocated.
    range : tuple of float, optional
        ``(rmin, rmax)`` of the histogram in Å. Bins follow :func:`numpy.histogram`: the last
        bin is closed on the right, so a distance equal to ``rmax`` is counted.
    norm : {'rdf', 'density', 'none'}, optional
        Normalisation (see Notes).
    exclusion_block : tuple of int, optional
        ``(a, b)``: leave out the pairs of the ``k``-th block of `a` atoms of `g1` with the
        ``k``-th block of `b` atoms of `g2`, e.g. ``(1, 1)`` for an atom with itself or
        ``(3, 3)`` for the atoms of one water molecule. The block sizes must divide the group
        sizes.
    exclude_same : {'residue', 'segment', 'chain'}, optional
        Leave out pairs of atoms in the same residue, segment or chain. Cannot be combined
        with `exclusion_block`.
    backend : {'serial', 'OpenMP', 'distopia'}, optional
        MDAnalysis's *distance* backend. Accepted for compatibility and ignored: the distances
        are always computed by this package's kernels. (The parallel backend over frames is
        the ``backend`` argument of :meth:`run`.)
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}, optional
        Keyword only. Where the kernels run. ``'auto'`` (default) uses the first GPU when the
        package was built with CUDA, a GPU is usable in the worker process and a frame holds
        at least a million atom pairs, and the CPU otherwise. ``'cuda'`` (GPU 0) or
        ``'cuda:N'`` insist on a GPU: without one the first frame raises a RuntimeError
        naming what is missing. Single-precision GPU counts equal the CPU's bit for bit.
    precision : {'single', 'double'}, optional
        Keyword only. Arithmetic of the distances. ``'double'`` (default) gives InterRDF's
        counts exactly: every pair is computed in float32 and those within a proven rounding
        bound of a bin edge again in float64, so it costs little more than ``'single'``.
        ``'single'`` (opt-in, the last few percent) may move a pair whose distance lies within
        float32 rounding (a few parts in 10^7) of a bin edge into the neighbouring bin: on the
        adk demo's water O–O RDF, 120 of 49.3 million counts.
    n_threads : int, optional
        Keyword only. CPU threads per process (default: all cores, divided among the workers
        of a parallel run).
    method : {'auto', 'allpairs', 'cells'}, optional
        Keyword only. How the pairs within ``rmax`` are found: ``'allpairs'`` computes every
        pair's distance; ``'cells'`` sorts the atoms into a cell list and only looks at pairs
        in neighbouring cells, so the cost grows as N instead of N² when ``rmax`` is well
        below the box size. Both give the same counts (the distances are computed by the
        same arithmetic). ``'auto'`` (default) estimates the work of both for each frame and
        takes the cheaper one. Cell lists run on the CPU.
    verbose : bool, optional
        Show detailed progress of the calculation if set to ``True``.

    Attributes
    ----------
    results.bins : numpy.ndarray
        Centres of the bins in Å.
    results.edges : numpy.ndarray
        Edges of the bins in Å (``nbins + 1`` values).
    results.count : numpy.ndarray
        Number of pairs in each bin, summed over frames (float64, as MDAnalysis).
    results.count_uint64 : numpy.ndarray
        The same counts as exact 64-bit integers.
    results.rdf : numpy.ndarray
        The normalised histogram.
    results.volume_cum : float
        Sum of the box volumes of all frames (only with ``norm='rdf'``).

    Notes
    -----
    With :math:`n_k` the count of bin :math:`k` over :math:`N_\mathrm{frames}` frames,
    :math:`r_k` its edges and :math:`V_k = \frac{4}{3}\pi(r_{k+1}^3 - r_k^3)` the shell
    volume:

    .. math::

        g_\mathrm{rdf}(r_k) = \frac{n_k}{N_\mathrm{frames}\, V_k\, N_\mathrm{pairs} /
        \langle V \rangle}, \qquad
        g_\mathrm{density}(r_k) = \frac{n_k}{N_\mathrm{frames}\, V_k}, \qquad
        g_\mathrm{none}(r_k) = \frac{n_k}{N_\mathrm{frames}}

    where :math:`\langle V \rangle` is the frame-averaged box volume and
    :math:`N_\mathrm{pairs} = N_A N_B - a\,b\,N_A/a` with an ``exclusion_block`` ``(a, b)``
    (``exclude_same`` does not change :math:`N_\mathrm{pairs}`, as in MDAnalysis).

    When `g1` and `g2` are the same group every ordered pair is counted, ``(i, j)`` and
    ``(j, i)``, and each atom with itself at distance 0 (in the first bin when ``rmin`` is 0)
    unless an ``exclusion_block`` removes it, exactly as MDAnalysis does; the kernel computes
    each unordered pair once.

    Distances are taken between positions wrapped into the primary cell and with the
    difference vector rounded to float32, as MDAnalysis does; the minimum image is exact for
    every box and every distance up to ``rmax``.

    Examples
    --------
    >>> import MDAnalysis as mda
    >>> from MDAnalysisTests.datafiles import TPR, XTC
    >>> from mdakit_fastrdf import InterRDF
    >>> u = mda.Universe(TPR, XTC)
    >>> ow = u.select_atoms("name OW")
    >>> rdf = InterRDF(ow, ow, nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1)).run()
    >>> rdf.results.bins.shape, rdf.results.rdf.shape
    ((75,), (75,))

    Frames can be split over processes with MDAnalysis's parallel backends; every backend
    gives the same integer counts::

        rdf = InterRDF(ow, ow).run(backend="multiprocessing", n_workers=4)
    """

    coordinates = "mdanalysis"
    outputs = OutputSpec(
        fields=histogram_fields(),
        tables=(Table(fields=("rdf", "count_uint64")),),
    )

    def __init__(
        self,
        g1,
        g2,
        nbins=75,
        range=(0.0, 15.0),
        norm="rdf",
        exclusion_block=None,
        exclude_same=None,
        backend="serial",
        *,
        device="auto",
        precision="double",
        n_threads=None,
        method="auto",
        **kwargs,
    ):
        check_atomgroup(g1, "g1")
        check_atomgroup(g2, "g2")
        if g1.universe is not g2.universe:
            raise ValueError("g1 and g2 must belong to the same Universe")
        # MDAnalysis's order of checks: exclude_same, then norm, then the rest
        check_exclude_same(exclude_same)
        if exclude_same is not None and exclusion_block is not None:
            raise ValueError(
                "The exclude_same argument to InterRDF cannot be used with exclusion_block."
            )
        check_norm(norm)
        self._init_histograms(g1.universe, nbins, range, norm, device=device,
                              precision=precision, n_threads=n_threads, method=method,
                              kwargs=kwargs)
        self.g1 = g1
        self.g2 = g2
        self._exclusion_block = exclusion_block
        self.exclude_same = EXCLUDE_SAME.get(exclude_same)
        if exclusion_block is not None:
            self._check_exclusion_block(exclusion_block)
        if not isinstance(backend, str) or backend.lower() not in _DISTANCE_BACKENDS:
            raise ValueError(
                f"backend (the distance backend of MDAnalysis) must be one of "
                f"'serial', 'OpenMP', 'distopia'; got {backend!r}. For parallel frames use "
                f"run(backend='multiprocessing' or 'dask')."
            )
        self.backend = backend

    def _check_exclusion_block(self, block):
        try:
            xa, xb = block
        except (TypeError, ValueError):
            raise ValueError(f"exclusion_block must be a pair of integers, got {block!r}") from None
        for v in (xa, xb):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"exclusion_block must hold two positive integers, got {block!r}")
        na, nb = len(self.g1), len(self.g2)
        if na % xa or nb % xb:
            raise ValueError(
                f"exclusion_block={tuple(block)!r} does not divide the group sizes "
                f"(len(g1)={na}, len(g2)={nb}); each group must consist of whole blocks"
            )
        if na // xa != nb // xb:
            raise ValueError(
                f"exclusion_block={tuple(block)!r} gives {na // xa} blocks in g1 but "
                f"{nb // xb} in g2; both groups must hold the same number of blocks"
            )

    # -- the base class's hooks ---------------------------------------------------------
    def _layout(self):
        """Two species and one pair; one species paired with itself when g1 is g2 (the
        kernel then computes each unordered pair once and counts it twice)."""
        n1, n2 = len(self.g1), len(self.g2)
        xa, xb = self._exclusion_block or (None, None)
        same = np.array_equal(self.g1.ix, self.g2.ix) and xa == xb
        if self._exclusion_block is not None:
            la, lb = np.arange(n1) // xa, np.arange(n2) // xb
        elif self.exclude_same is not None:
            la, lb = getattr(self.g1, self.exclude_same), getattr(self.g2, self.exclude_same)
        labels = (exclusion_labels(la, lb, same)
                  if self._exclusion_block is not None or self.exclude_same is not None
                  else None)
        groups = [self.g1] if same else [self.g1, self.g2]
        return PairLayout.of_groups(groups, [(0, 0)] if same else [(0, 1)], labels,
                                    sizes=(n1, n2))

    def _allocate_counts(self, nbins):
        super()._allocate_counts(nbins)
        self.results.count_uint64 = self.results.count_uint64.reshape(nbins)

    def _frame_out(self, out, field="count_uint64", index=None):
        # the kernels write (pairs, nbins); InterRDF's counts are (nbins,)
        return super()._frame_out(out.reshape(1, -1) if out.ndim == 1 else out, field, index)

    def _n_pairs(self):
        """N_pairs of norm="rdf", as MDAnalysis computes it."""
        nA, nB = len(self.g1), len(self.g2)
        N = nA * nB
        if self._exclusion_block:
            xA, xB = self._exclusion_block
            nblocks = nA / xA
            N -= xA * xB * nblocks
        return N

    def _normalise(self, res):
        res.count = res.count_uint64.astype(np.float64)
        res.rdf = self._normalised(res.count, self._n_pairs())

    def _output_parameters(self):
        block = self._exclusion_block
        return {
            "exclusion_block": None if block is None else [int(v) for v in block],
            "exclude_same": {v: k for k, v in EXCLUDE_SAME.items()}.get(self.exclude_same),
            "n_atoms1": len(self.g1),
            "n_atoms2": len(self.g2),
        }

    @classmethod
    def _curves(cls, results, parameters, *, label=None):
        """One line: g(r), and the running number of g2 atoms around a g1 atom."""
        n_frames, n_a = parameters["n_frames"], parameters["n_atoms1"]
        cn = running_coordination(np.asarray(results.count, dtype=np.float64), n_frames, n_a)
        cn_sem = None
        if "block_count_uint64" in results:
            from .base import block_sem

            per_block = running_coordination(
                results.block_count_uint64.astype(np.float64), results.block_n_frames[:, None],
                n_a)
            cn_sem = block_sem(per_block)
        return [Curve(label, results.rdf, results.get("rdf_sem"), cn, cn_sem)]

    #: what the running coordination number counts (the plot's second axis)
    _coordination_label = "g2 atoms around a g1 atom"

    # -- deprecated attributes, as in MDAnalysis --------------------------------------
    @property
    def edges(self):
        return self._deprecated("edges", "edges")

    @property
    def count(self):
        return self._deprecated("count", "count")

    @property
    def bins(self):
        return self._deprecated("bins", "bins")

    @property
    def rdf(self):
        return self._deprecated("rdf", "rdf")
