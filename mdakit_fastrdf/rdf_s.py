r"""Site-specific radial distribution functions: a drop-in for MDAnalysis's ``InterRDF_s``."""

from __future__ import annotations

import warnings

import numpy as np
from MDAnalysis.analysis.results import ResultsGroup

from ._base import (
    RDFBase,
    check_atomgroup,
    check_nbins,
    check_norm,
    check_range,
    histogram_edges,
    mdanalysis_compat,
    shell_volumes,
)
from ._engine import NO_BOX, validate_n_threads, validate_precision

__all__ = ["InterRDF_s"]


def available_memory_bytes():
    """Memory the system can give this process now (``MemAvailable`` of /proc/meminfo), or
    None where that is not known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return None


def _sum_arrays_lists(values):
    """Aggregate per-worker lists of arrays element by element (ResultsGroup lookup)."""
    return [np.sum(arrays, axis=0) for arrays in zip(*values)]


class InterRDF_s(RDFBase):
    r"""Site-specific radial distribution functions.

    A drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF_s`: for every pair of
    AtomGroups ``(ag1, ag2)`` in `ags` it keeps one histogram per atom pair ``(i, j)``,
    ``i`` in `ag1` and ``j`` in `ag2`, with the same parameters, results, binning,
    normalisations and deprecations. The histograms are filled by a compiled, threaded CPU
    kernel instead of ``capped_distance`` followed by NumPy indexing; the GPU is not used
    (the work is dominated by writing ``n1 * n2 * nbins`` counters, not by distances).

    Parameters
    ----------
    u : Universe
        Accepted for compatibility and unused (deprecated in MDAnalysis, which warns; so does
        this class).
    ags : list of [AtomGroup, AtomGroup]
        Pairs of groups; each pair gives an array of site-site histograms.
    nbins : int, optional
        Number of bins in the histogram.
    range : tuple of float, optional
        ``(rmin, rmax)`` of the histogram in Å.
    norm : {'rdf', 'density', 'none'}, optional
        Normalisation (see Notes).
    density : bool, optional
        Deprecated (as in MDAnalysis 2.3): ``True`` sets ``norm='density'`` and warns.
    backend : {'serial', 'OpenMP', 'distopia'}, optional
        MDAnalysis's distance backend; accepted and ignored.
    precision : {'single', 'double'}, optional
        Keyword only. ``'double'`` reproduces MDAnalysis's counts exactly; ``'single'``
        (default, as for :class:`InterRDF`) may move a pair within float32 rounding of a bin
        edge into the neighbouring bin.
    n_threads : int, optional
        Keyword only. CPU threads per process (default: all cores, shared among the workers
        of a parallel run).
    verbose : bool, optional
        Show detailed progress of the calculation if set to ``True``.

    Attributes
    ----------
    results.count : list of numpy.ndarray
        One float64 array of shape ``(len(ag1), len(ag2), nbins)`` per pair of groups: the
        number of frames in which ``(i, j)`` lay in each bin.
    results.rdf : list of numpy.ndarray
        The normalised ``results.count``.
    results.cdf : list of numpy.ndarray
        Set by :meth:`get_cdf`: the cumulative count per frame.
    results.edges, results.bins : numpy.ndarray
        Bin edges and centres in Å.
    results.indices : list
        ``[ag1.indices, ag2.indices]`` per pair of groups.
    results.volume_cum : float
        Sum of the box volumes (only with ``norm='rdf'``).

    Raises
    ------
    MemoryError
        From :meth:`run`, before anything is allocated, when the histograms
        (``sum(n1 * n2) * nbins * 8`` bytes per process, plus one more copy for combining the
        workers of a parallel run) exceed the memory available (``MemAvailable``). The message
        gives the figure; use fewer bins, smaller groups or fewer workers.

    Notes
    -----
    The bin of a pair at distance :math:`r \le r_\mathrm{max}` is MDAnalysis's
    :math:`k = \lfloor (r - r_\mathrm{min})\, n_\mathrm{bins} / (r_\mathrm{max} -
    r_\mathrm{min}) \rfloor` (truncated toward zero, counted when :math:`0 \le k <
    n_\mathrm{bins}`), not :func:`numpy.histogram`'s rule: a pair at exactly
    :math:`r_\mathrm{max}` is not counted and one just below :math:`r_\mathrm{min} > 0` falls
    in bin 0, exactly as in MDAnalysis. With :math:`n_{ij,k}` the count of bin :math:`k`,
    :math:`V_k = \frac{4}{3}\pi(r_{k+1}^3 - r_k^3)` and :math:`\langle V\rangle` the mean box
    volume:

    .. math::

        g^\mathrm{rdf}_{ij}(r_k) = \frac{n_{ij,k}\,\langle V\rangle}{N_\mathrm{frames} V_k},
        \qquad
        g^\mathrm{density}_{ij}(r_k) = \frac{n_{ij,k}}{N_\mathrm{frames} V_k},
        \qquad
        g^\mathrm{none}_{ij}(r_k) = \frac{n_{ij,k}}{N_\mathrm{frames}}

    and :meth:`get_cdf` gives :math:`\sum_{k' \le k} n_{ij,k'} / N_\mathrm{frames}`.

    Memory: each pair of groups holds ``n1 * n2 * nbins`` float64 counters (8 bytes each);
    every worker of a parallel run holds a full set.

    Examples
    --------
    >>> import MDAnalysis as mda
    >>> from MDAnalysisTests.datafiles import GRO_MEMPROT, XTC_MEMPROT
    >>> from mdakit_fastrdf import InterRDF_s
    >>> u = mda.Universe(GRO_MEMPROT, XTC_MEMPROT)
    >>> s1 = u.select_atoms("name ZND and resid 289")
    >>> s2 = u.select_atoms("(name OD1 or name OD2) and resid 51 and sphzone 5.0 (resid 289)")
    >>> s3 = u.select_atoms("name ZND and (resid 291 or resid 292)")
    >>> s4 = u.select_atoms("(name OD1 or name OD2) and sphzone 5.0 (resid 291)")
    >>> rdf = InterRDF_s(u, [[s1, s2], [s3, s4]], precision="double").run()  # doctest: +SKIP
    >>> rdf.results.rdf[0].shape  # doctest: +SKIP
    (1, 2, 75)
    >>> cdf = rdf.get_cdf()  # doctest: +SKIP
    """

    def __init__(
        self,
        u,
        ags,
        nbins=75,
        range=(0.0, 15.0),
        norm="rdf",
        density=False,
        backend="serial",
        *,
        precision="single",
        n_threads=None,
        **kwargs,
    ):
        ags = self._check_ags(ags)
        super().__init__(ags[0][0].universe.trajectory, **kwargs)
        warnings.warn(
            "The `u` attribute is superflous and will be removed in MDAnalysis 3.0.0.",
            DeprecationWarning,
            stacklevel=2,
        )
        self.ags = ags
        self.norm = check_norm(norm)
        nbins = check_nbins(nbins)
        range = check_range(range)
        self.rdf_settings = {"bins": nbins, "range": range}
        if density:
            warnings.warn(
                "The `density` attribute was deprecated in MDAnalysis 2.3.0 and will be "
                "removed in MDAnalysis 3.0.0. Please use `norm=density` instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            self.norm = "density"
        self.backend = backend
        # CPU only: the device is fixed; the Engine of the base class is not used.
        self.device = "cpu"
        self.precision = validate_precision(precision)
        self.n_threads = validate_n_threads(n_threads)
        self._worker_threads = self.n_threads
        self._engine = None

    @staticmethod
    def _check_ags(ags):
        try:
            ags = [list(pair) for pair in ags]
        except TypeError:
            raise TypeError(
                f"ags must be a list of [AtomGroup, AtomGroup] pairs, got {type(ags).__name__}"
            ) from None
        if not ags:
            raise ValueError("ags must hold at least one [AtomGroup, AtomGroup] pair")
        u = None
        for k, pair in enumerate(ags):
            if len(pair) != 2:
                raise ValueError(f"ags[{k}] must be a pair [ag1, ag2], got {len(pair)} items")
            for m, ag in enumerate(pair):
                check_atomgroup(ag, f"ags[{k}][{m}]")
                if u is None:
                    u = ag.universe
                elif ag.universe is not u:
                    raise ValueError("all AtomGroups in ags must belong to the same Universe")
        return ags

    def memory_bytes(self, n_workers=1):
        """Bytes of histogram memory a run needs: ``sum(n1 * n2) * nbins * 8`` per process
        (each of `n_workers`), plus one combined copy when there is more than one."""
        per = sum(len(a) * len(b) for a, b in self.ags) * self.rdf_settings["bins"] * 8
        n_workers = max(1, int(n_workers or 1))
        return per * (n_workers + (1 if n_workers > 1 else 0))

    def _check_memory(self, n_workers=1):
        need = self.memory_bytes(n_workers)
        avail = available_memory_bytes()
        if avail is not None and need > avail:
            shapes = ", ".join(f"({len(a)}, {len(b)}, {self.rdf_settings['bins']})"
                               for a, b in self.ags)
            raise MemoryError(
                f"InterRDF_s needs {need / 2**30:.2f} GiB for its site-site histograms "
                f"(float64 arrays of shapes {shapes}, x{max(1, int(n_workers or 1))} "
                f"process(es)) but only {avail / 2**30:.2f} GiB are available; use fewer "
                f"bins, smaller groups or fewer workers"
            )

    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, *,
            n_workers=None, n_parts=None, backend=None, unsupported_backend=False,
            progressbar_kwargs=None):
        """Perform the calculation (see :meth:`MDAnalysis.analysis.base.AnalysisBase.run`).

        Checks first that the histograms fit in memory (see Raises).
        """
        self._check_memory(n_workers if backend not in (None, "serial") else 1)
        return super().run(
            start=start, stop=stop, step=step, frames=frames, verbose=verbose,
            n_workers=n_workers, n_parts=n_parts, backend=backend,
            unsupported_backend=unsupported_backend, progressbar_kwargs=progressbar_kwargs,
        )

    def _prepare(self):
        from . import _fastrdf_cpu

        self._kernel = _fastrdf_cpu.site_histograms
        nbins = self.rdf_settings["bins"]
        edges, bins = histogram_edges(nbins, self.rdf_settings["range"])
        self._check_memory(1)
        self.results.count = [
            np.zeros((len(ag1), len(ag2), nbins), dtype=np.float64) for ag1, ag2 in self.ags
        ]
        self.results.edges = edges
        self.results.bins = bins
        if self.norm == "rdf":
            self.results.volume_cum = 0
        self._maxrange = self.rdf_settings["range"][1]
        self._ix = [np.concatenate([ag1.ix, ag2.ix]) for ag1, ag2 in self.ags]
        self._bufs = [np.empty((len(ix), 3), dtype=np.float32) for ix in self._ix]

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_kernel", None)  # a compiled function does not pickle
        return state

    def _single_frame(self):
        box = self._frame_box()
        rmin, rmax = self.rdf_settings["range"]
        nbins = self.rdf_settings["bins"]
        double = self.precision == "double"
        threads = self._worker_threads or 0
        for k, (ag1, ag2) in enumerate(self.ags):
            n1, n2 = len(ag1), len(ag2)
            buf = self._take_positions(self._ix[k], self._bufs[k])
            kbox = mdanalysis_compat(box, buf, n1, n2, rmax)
            self._kernel(buf[:n1], buf[n1:], rmin, rmax, nbins, kbox.kind,
                         None if kbox.kind == NO_BOX else kbox.vectors,
                         self.results.count[k], double, threads)
        if self.norm == "rdf":
            self.results.volume_cum += self._ts.volume

    def _get_aggregator(self):
        return ResultsGroup(
            lookup={
                "count": _sum_arrays_lists,
                "volume_cum": ResultsGroup.ndarray_sum,
                "bins": ResultsGroup.ndarray_mean,
                "edges": ResultsGroup.ndarray_mean,
            }
        )

    def _conclude(self):
        norm = self.n_frames
        if self.norm in ["rdf", "density"]:
            norm *= shell_volumes(self.results.edges)
        if self.norm == "rdf":
            self.volume_cum = self.results.volume_cum
            norm *= 1 / (self.volume_cum / self.n_frames)
        self.results.indices = []
        self.results.rdf = []
        for i, (ag1, ag2) in enumerate(self.ags):
            self.results.indices.append([ag1.indices, ag2.indices])
            self.results.rdf.append(self.results.count[i] / norm)

    def get_cdf(self):
        r"""Calculate the cumulative counts for all sites.

        :math:`N_{ij}(r_k) = \sum_{k' \le k} n_{ij,k'} / N_\mathrm{frames}`; returned and
        stored in :attr:`results.cdf`.

        Returns
        -------
        cdf : list
            list of arrays with the same structure as :attr:`results.rdf`
        """
        self.results.cdf = []
        for count in self.results.count:
            self.results.cdf.append(np.cumsum(count, axis=2) / self.n_frames)
        return self.results.cdf

    # -- deprecated attributes, with MDAnalysis's messages ----------------------------
    def _old(self, name, use, key):
        warnings.warn(
            f"The `{name}` attribute was deprecated in MDAnalysis 2.0.0 and will be removed "
            f"in MDAnalysis 3.0.0. Please use `results.{use}` instead",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.results[key]

    @property
    def edges(self):
        return self._old("edges", "bins", "edges")

    @property
    def count(self):
        return self._old("count", "bins", "count")

    @property
    def bins(self):
        return self._old("bins", "bins", "bins")

    @property
    def rdf(self):
        return self._old("rdf", "rdf", "rdf")

    @property
    def cdf(self):
        return self._old("cdf", "cdf", "cdf")
