r"""Radial distribution functions on compiled pair-distance histogram kernels.

:class:`InterRDF` is a drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF`:
same parameters, defaults, results and errors; only the import line changes.
"""

from __future__ import annotations

import numbers

import numpy as np
from MDAnalysis.analysis.results import ResultsGroup

from .base import (
    RDFBase,
    check_atomgroup,
    check_nbins,
    check_norm,
    check_range,
    histogram_edges,
    mdanalysis_compat,
    shell_volumes,
)

__all__ = ["InterRDF"]

_EXCLUDE_SAME = {"residue": "resindices", "segment": "segindices", "chain": "chainIDs"}
_DISTANCE_BACKENDS = ("serial", "openmp", "distopia")


class InterRDF(RDFBase):
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
        Keyword only. Arithmetic of the distances. ``'double'`` reproduces InterRDF's counts
        exactly (on the CPU at 1.3–1.5 times the time of single: the pairs are computed in
        float32 and those within rounding of a bin edge again in float64); ``'single'``
        (default, faster) may move a pair whose distance lies within float32 rounding (a few
        parts in 10^7) of a bin edge into the neighbouring bin.
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
        precision="single",
        n_threads=None,
        method="auto",
        **kwargs,
    ):
        check_atomgroup(g1, "g1")
        check_atomgroup(g2, "g2")
        if g1.universe is not g2.universe:
            raise ValueError("g1 and g2 must belong to the same Universe")
        super().__init__(g1.universe.trajectory, **kwargs)
        self.g1 = g1
        self.g2 = g2
        self.norm = str(norm).lower()
        nbins = check_nbins(nbins)
        range = check_range(range)
        self.rdf_settings = {"bins": nbins, "range": range}
        self._exclusion_block = exclusion_block
        if exclude_same is not None and exclude_same not in _EXCLUDE_SAME:
            raise ValueError(
                "The exclude_same argument to InterRDF must be None, 'residue', 'segment' "
                "or 'chain'."
            )
        if exclude_same is not None and exclusion_block is not None:
            raise ValueError(
                "The exclude_same argument to InterRDF cannot be used with exclusion_block."
            )
        self.exclude_same = _EXCLUDE_SAME.get(exclude_same)
        self.norm = check_norm(self.norm)
        if exclusion_block is not None:
            self._check_exclusion_block(exclusion_block)
        if not isinstance(backend, str) or backend.lower() not in _DISTANCE_BACKENDS:
            raise ValueError(
                f"backend (the distance backend of MDAnalysis) must be one of "
                f"'serial', 'OpenMP', 'distopia'; got {backend!r}. For parallel frames use "
                f"run(backend='multiprocessing' or 'dask')."
            )
        self.backend = backend
        self._init_compute(device, precision, n_threads, method)

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

    # -- per-worker setup ---------------------------------------------------------------
    def _prepare(self):
        self._check_histogram_memory(1, self.rdf_settings["bins"], result_arrays=2)
        edges, bins = histogram_edges(self.rdf_settings["bins"], self.rdf_settings["range"])
        nbins = len(bins)
        self.results.edges = edges
        self.results.bins = bins
        self.results.count_uint64 = np.zeros(nbins, dtype=np.uint64)
        if self.norm == "rdf":
            self.results.volume_cum = 0
        self._edges = np.ascontiguousarray(edges, dtype=np.float64)
        self._out = self.results.count_uint64.reshape(1, nbins)
        self._rmax = self.rdf_settings["range"][1]

        n1, n2 = len(self.g1), len(self.g2)
        xa, xb = self._exclusion_block or (None, None)
        same = np.array_equal(self.g1.ix, self.g2.ix) and xa == xb
        if same:
            self._ix = self.g1.ix.copy()
            self._offsets = np.array([0, n1], dtype=np.int64)
            self._pairs = np.array([[0, 0]], dtype=np.int32)
        else:
            self._ix = np.concatenate([self.g1.ix, self.g2.ix])
            self._offsets = np.array([0, n1, n1 + n2], dtype=np.int64)
            self._pairs = np.array([[0, 1]], dtype=np.int32)
        self._labels = self._make_labels(same)
        self._buf = np.empty((len(self._ix), 3), dtype=np.float32)
        self._n1, self._n2 = n1, n2
        self._engine = self._make_engine()

    def _make_labels(self, same):
        """Per-atom integer labels: pairs with equal labels are excluded (or None)."""
        if self._exclusion_block is not None:
            xa, xb = self._exclusion_block
            la = np.arange(len(self.g1)) // xa
            lb = np.arange(len(self.g2)) // xb
        elif self.exclude_same is not None:
            la = getattr(self.g1, self.exclude_same)
            lb = getattr(self.g2, self.exclude_same)
        else:
            return None
        if same:
            _, codes = np.unique(la, return_inverse=True)
        else:
            _, codes = np.unique(np.concatenate([la, lb]), return_inverse=True)
        return np.ascontiguousarray(codes.reshape(-1), dtype=np.int32)

    def _mdanalysis_compat(self, box, coords):
        """Prepare ``coords`` and the box as MDAnalysis's capped_distance would (see
        :func:`mdakit_fastrdf._base.mdanalysis_compat`)."""
        return mdanalysis_compat(box, coords, self._n1, self._n2, self._rmax)

    def _single_frame(self):
        ts = self._ts
        box = self._frame_box()
        self._take_positions(self._ix, self._buf)
        box = self._mdanalysis_compat(box, self._buf)
        self._engine.accumulate(
            self._buf, self._offsets, self._pairs, self._edges, box, self._labels,
            self._frame_out(self._out),
        )
        if self.norm == "rdf":
            self.results.volume_cum += ts.volume

    def _get_aggregator(self):
        return ResultsGroup(
            lookup={
                "count_uint64": ResultsGroup.ndarray_sum,
                "volume_cum": ResultsGroup.ndarray_sum,
                "bins": ResultsGroup.ndarray_mean,
                "edges": ResultsGroup.ndarray_mean,
                **self._block_lookup(),
            }
        )

    def _conclude(self):
        self.results.count = self.results.count_uint64.astype(np.float64)
        norm = self.n_frames
        if self.norm in ["rdf", "density"]:
            norm *= shell_volumes(self.results.edges)

        if self.norm == "rdf":
            nA = len(self.g1)
            nB = len(self.g2)
            N = nA * nB
            if self._exclusion_block:
                xA, xB = self._exclusion_block
                nblocks = nA / xA
                N -= xA * xB * nblocks
            self.volume_cum = self.results.volume_cum
            box_vol = self.volume_cum / self.n_frames
            norm *= N / box_vol

        self.results.rdf = self.results.count / norm

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
