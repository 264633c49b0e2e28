r"""Site-specific radial distribution functions: a drop-in for MDAnalysis's ``InterRDF_s``."""

from __future__ import annotations

import warnings

import numpy as np

from .base import PairHistogramBase, PairLayout
from .blocks import block_sem
from .boxes import BOX_FIELDS, BoxStatistics
from .checks import check_atomgroup, check_norm, check_normalization_mode
from .coords import prepare_coordinates
from .declarations import Curve, Field, OutputSpec, Table, histogram_fields
from .memory import available_memory_bytes, run_layout

__all__ = ["InterRDF_s"]

#: Above this many site pairs, the default plot draws the mean of each pair of groups.
MAX_SITE_LINES = 20


class InterRDF_s(BoxStatistics, PairHistogramBase):
    r"""Site-specific radial distribution functions.

    A drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF_s`: for every pair of
    AtomGroups ``(ag1, ag2)`` in `ags` it keeps one histogram per atom pair ``(i, j)``,
    ``i`` in `ag1` and ``j`` in `ag2`, with the same parameters, results, binning,
    normalisations and deprecations. The histograms are filled by a compiled, threaded CPU
    kernel (the site mode of the package's engine) instead of ``capped_distance`` followed
    by NumPy indexing. There is no GPU kernel for site histograms: their work is dominated
    by writing ``n1 * n2 * nbins`` counters, not by distances, so ``device='auto'`` runs them
    on the CPU and ``device='cuda'`` is a ValueError.

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
    device : {'auto', 'cpu'}, optional
        Keyword only. Where the kernel runs: the CPU (``'auto'``, the default, means the CPU
        here; ``'cuda'`` is a ValueError, see above).
    precision : {'single', 'double'}, optional
        Keyword only. ``'double'`` (default) reproduces MDAnalysis's counts exactly;
        ``'single'`` (opt-in, as for :class:`InterRDF`) may move a pair within float32
        rounding of a bin edge into the neighbouring bin.
    n_threads : int, optional
        Keyword only. CPU threads per process (default: all cores, shared among the workers
        of a parallel run).
    normalization_mode : {'exact'}, optional
        Keyword only. Only ``'exact'``: a site pair is one atom with one other atom, whose
        RDF has no finite-size factor (``'finite_size'``, see :class:`InterRDF`, is a
        ValueError).
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
    results.rho : numpy.ndarray
        ``(len(ags), 2)``: the frame-averaged number densities :math:`N/\langle V\rangle`
        (Å⁻³) of the two groups of each pair, every `norm` (absent when a frame has no
        box); ``results.box_volume_cum`` and ``results.min_box_widths`` as in
        :class:`InterRDF`.

    Raises
    ------
    MemoryError
        From :meth:`run`, before anything is allocated, when the peak memory of the
        histograms (see *Memory* below) exceeds the memory available (``MemAvailable``);
        from :meth:`get_cdf` when ``results.cdf`` does not fit. The message gives the figure
        in GiB and the parameters to change: nbins, the site groups, n_workers / n_parts,
        blocks.

    See Also
    --------
    mdakit_fastrdf.InterRDF : the RDF of a pair of groups (the mean over its site pairs).
    mdakit_fastrdf.SpeciesRDF : every species pair of a system in one pass.

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

    **Memory.** One set of histograms is :math:`S = 8\,n_\mathrm{bins} \sum n_1 n_2` bytes
    (float64, summed over the pairs of groups); with `blocks` :math:`B` a process holds
    :math:`H = (1 + B)\,S` (its counts and the block counts), else :math:`H = S`.
    :meth:`run` checks the peak on this machine (:meth:`memory_bytes`):

    * serial: :math:`H + S`, the counts and ``results.rdf`` (plus :math:`H` when
      `n_parts` > 1, for the sum of the parts);
    * parallel, :math:`W` workers and :math:`P` parts: :math:`(P + W + 2)\,H`. Every
      worker holds its set and, while it sends it back, a pickled copy (:math:`2WH`, as
      the workers of equal parts finish together); the caller holds every part it
      received (:math:`PH`, as MDAnalysis's backends hand all parts to the aggregation)
      and the pickled copy of the part it is receiving; the parts are then summed in
      place into one accumulator and ``_conclude`` adds ``results.rdf``
      (:math:`(P + 1)H + S`, less);
    * with blocks, at least :math:`(3B + 2)\,S + \max_k (\sum_{j<k} S_j + (B + 2)\,S_k)`
      for the block results made after the run (:math:`S_k`: the histograms of the
      :math:`k`-th pair of groups): the rdf of every block, their stack and ``rdf_sem``;
    * :meth:`get_cdf` needs :math:`S` more (checked when it is called;
      ``memory_bytes(..., cdf=True)`` includes it).

    :math:`W` and :math:`P` are those the backend will use: ``'serial'`` (default) is one
    process; MDAnalysis's ``'multiprocessing'`` and ``'dask'`` start `n_workers` (1 if not
    given) and cut `n_parts` (default `n_workers`) parts; a backend object its
    ``n_workers`` workers; ``'node'`` and :class:`~mdakit_fastrdf.backends.NodeBackend` the
    workers of its plan for the CPU and, unless `n_parts` is given, its many small parts
    (``part_frames``); a dask client backend its ``n_workers`` and parts. Parts are at most
    the frames, workers at most the parts. Workers are counted as if on this machine (for
    a dask cluster on other machines the figure is an upper bound).

    **Time.** The results are the cost: ``results.count`` and ``results.rdf`` hold
    :math:`2S` bytes (413 MB for 100 × 3,000 plus 4 × 11,084 site pairs at 75 bins), and
    ``results.rdf = count / norm`` is one pass over them, as in MDAnalysis. On that case
    (``benchmarks/bench_sites.py``, 5 frames) the normalisation takes as long as all the
    frames' kernel work, so the run is about 2 times MDAnalysis's; a first run in a fresh
    process also waits for the kernel to hand over the fresh pages. For the RDF of a pair
    of groups use :class:`~mdakit_fastrdf.InterRDF` (its ``results.rdf`` is
    ``rdf[k].mean(axis=(0, 1))`` here, with ``nbins`` numbers), for every species pair of
    a system :class:`~mdakit_fastrdf.SpeciesRDF`.

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

    coordinates = "mdanalysis"
    _count_fields = ("count",)
    #: no ``method``: the site histograms have one kernel
    compute_keywords = ("device", "precision", "n_threads")
    outputs = OutputSpec(
        fields=(
            # the counts of a site pair are float64, as MDAnalysis's, written as integers
            Field("count", "frames", "frames with the pair in the bin", integer=True),
            *(f for f in histogram_fields() if f.name not in ("count", "count_uint64")),
            Field("cdf", "pairs per frame", "cumulative count per frame"),
            *BOX_FIELDS,
        ),
        tables=(Table(fields=("rdf", "count", "cdf"), labels=lambda res: _site_labels(res)),),
    )
    _coordination_label = "frames-averaged count of the second atom within r of the first"

    def __init__(self, u, ags, nbins=75, range=(0.0, 15.0), norm="rdf", density=False,
                 backend="serial", *, normalization_mode="exact", **kwargs):
        check_norm(norm)  # MDAnalysis checks norm first
        ags = self._check_ags(ags)
        device = kwargs.get("device", getattr(kwargs.get("compute"), "device", "auto"))
        if str(device).strip().lower().startswith("cuda"):
            raise ValueError(
                f"device={device!r}: InterRDF_s has no GPU kernel (site histograms are "
                "dominated by writing n1 * n2 * nbins counters); use device='cpu' or "
                "device='auto', which run it on the CPU")
        # bins are double-precision bins of any number here (their memory is checked)
        self._init_histograms(ags[0][0].universe, nbins, range, norm, kwargs=kwargs,
                              nbins_limit=None)
        warnings.warn(
            "The `u` attribute is superflous and will be removed in MDAnalysis 3.0.0.",
            DeprecationWarning,
            stacklevel=2,
        )
        self.ags = ags
        if density:
            warnings.warn(
                "The `density` attribute was deprecated in MDAnalysis 2.3.0 and will be "
                "removed in MDAnalysis 3.0.0. Please use `norm=density` instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            self.norm = "density"
        self.backend = backend
        if check_normalization_mode(normalization_mode, self.norm, "InterRDF_s") != "exact":
            raise ValueError(
                "normalization_mode='finite_size' does not apply to InterRDF_s: each site "
                "pair is one atom with one other atom, normalised by N_pairs = 1, so there is "
                "no N / (N - 1) to rescale by; use normalization_mode='exact' (or InterRDF "
                "of a group with itself)")
        self.normalization_mode = "exact"

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

    def _pair_bytes(self):
        """Bytes of the float64 histograms of each pair of groups."""
        nbins = self.rdf_settings["bins"]
        return [len(a) * len(b) * nbins * 8 for a, b in self.ags]

    def _histogram_bytes(self):
        """Bytes of one set of float64 site-site histograms (all pairs of groups)."""
        return sum(self._pair_bytes())

    def memory_bytes(self, n_workers=1, blocks=None, *, n_parts=None, parallel=None,
                     cdf=False):
        """Peak bytes of histograms a run needs on this machine (the rule: Notes, *Memory*).

        Parameters
        ----------
        n_workers : int, optional
            Worker processes of the run (:meth:`run` uses the number the backend will start).
        blocks : int, optional
            As in :meth:`run`.
        n_parts : int, optional
            Parts the frames are cut into (default: `n_workers`); the caller receives one set
            of histograms per part.
        parallel : bool, optional
            Whether the histograms are made in worker processes and sent back (default:
            ``n_workers > 1 or n_parts > 1``); ``False``: a serial run in this process.
        cdf : bool, optional
            Also count ``results.cdf``, made by :meth:`get_cdf` after the run.
        """
        sizes = self._pair_bytes()
        S = sum(sizes)
        B = int(blocks or 0)
        H = (1 + B) * S  # what one process (part) holds: its counts and block counts
        W = max(1, int(n_workers or 1))
        P = max(1, int(n_parts or W))
        if parallel is None:
            parallel = W > 1 or P > 1
        if parallel:
            need = (P + W + 2) * H
        else:
            need = H + S + (H if P > 1 else 0)
        if B:
            # _conclude_blocks, after the run: counts, block counts and rdf ((B + 2) S), the
            # rdf of every block and their stack (2 B S), then rdf_sem pair by pair: the sems
            # made so far and block_sem's temporaries for the pair ((B + 2) S_k).
            done, worst = 0, 0
            for size in sizes:
                worst = max(worst, done + (B + 2) * size)
                done += size
            need = max(need, (3 * B + 2) * S + worst)
        if cdf:  # what remains after the run, plus results.cdf
            need = max(need, (3 + 2 * B + (1 if B else 0)) * S)
        return need

    def _memory_error(self, need, avail, what, advice):
        nbins = self.rdf_settings["bins"]
        shapes = ", ".join(f"({len(a)}, {len(b)}, {nbins})" for a, b in self.ags)
        S = self._histogram_bytes()
        return MemoryError(
            f"InterRDF_s needs {need / 2**30:.2f} GiB for its site-site histograms ({what}) "
            f"but only {avail / 2**30:.2f} GiB are available. One set of histograms (float64 "
            f"arrays of shapes {shapes}) is {S / 2**30:.2f} GiB; reduce nbins "
            f"(nbins={nbins}) or the site groups (ags){advice}"
        )

    def _check_run_memory(self, backend, n_workers, n_parts, blocks, start, stop, step,
                          frames):
        avail = available_memory_bytes()
        if avail is None:
            return
        parallel, W, P = run_layout(self, backend, n_workers, n_parts, start, stop, step,
                                    frames)
        need = self.memory_bytes(W, blocks, n_parts=P, parallel=parallel)
        if need <= avail:
            return
        B = int(blocks or 0)
        if parallel:
            what = (f"{W} worker process(es), each with its set and the copy it sends back; "
                    f"the {P} part(s) this process receives; one accumulator and results.rdf")
            advice = (f", run with fewer workers (n_workers={W}) or fewer parts "
                      f"(n_parts={P}; the caller holds one set per part), or serially "
                      f"({self.memory_bytes(1, blocks) / 2**30:.2f} GiB)")
        else:
            what = "the counts and results.rdf, in this process"
            advice = ""
        if B:
            what += f"; {B} blocks, each with its own set and normalised copy"
            advice += f", or use fewer blocks (blocks={B})"
        raise self._memory_error(need, avail, what, advice)

    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, *,
            n_workers=None, n_parts=None, backend=None, unsupported_backend=False,
            progressbar_kwargs=None, blocks=None):
        """Perform the calculation (see :meth:`MDAnalysis.analysis.base.AnalysisBase.run`).

        Checks first, before anything is allocated, that the histograms fit in memory with
        the workers and parts the backend will actually use (see Raises and Notes,
        *Memory*). With `blocks` (keyword only, see :meth:`mdakit_fastrdf.InterRDF.run`)
        every block holds a copy of the histograms, so the memory grows by ``blocks`` times.
        """
        self._check_run_memory(backend, n_workers, n_parts, blocks, start, stop, step, frames)
        return super().run(
            start=start, stop=stop, step=step, frames=frames, verbose=verbose,
            n_workers=n_workers, n_parts=n_parts, backend=backend,
            unsupported_backend=unsupported_backend, progressbar_kwargs=progressbar_kwargs,
            blocks=blocks,
        )

    # -- the base class's hooks ---------------------------------------------------------
    def _plan_device(self):
        # the site kernel runs on the CPU: a node run plans CPU workers, not GPU workers
        return "cpu"

    def _layout(self):
        """Two species per pair of groups (its first and second group), one segment each."""
        groups = [ag for pair in self.ags for ag in pair]
        layout = PairLayout.of_groups(groups, [(2 * k, 2 * k + 1) for k in
                                               builtins_range(len(self.ags))])
        starts = layout.offsets[0::2]
        layout.segments = tuple((int(s), int(s) + len(a) + len(b), len(a), len(b))
                                for s, (a, b) in zip(starts, self.ags))
        return layout

    def _check_histogram_memory(self, n_pairs, nbins, result_arrays):
        """This process's own histograms (the counts and, with blocks, the block counts)
        before ``_prepare`` allocates them: in a worker, the check of :meth:`run` was made in
        the caller."""
        avail = available_memory_bytes()
        plan = getattr(self, "_block_plan", None)
        B = 0 if plan is None else int(plan.max()) + 1
        need = (1 + B) * self._histogram_bytes()
        if avail is not None and need > avail:
            raise self._memory_error(need, avail, "this process's counts", "")

    def _allocate_counts(self, nbins):
        self.results.count = [
            np.zeros((len(ag1), len(ag2), nbins), dtype=np.float64) for ag1, ag2 in self.ags
        ]

    def _accumulate(self, coords, box):
        """The site histograms of every pair of groups, each prepared as MDAnalysis would."""
        rng, nbins = self.rdf_settings["range"], self.rdf_settings["bins"]
        for k, (start, stop, n1, n2) in enumerate(self.layout.segments):
            part = coords[start:stop]
            kbox = prepare_coordinates(self.coordinates, box, part, (n1, n2), self.rmax)
            self.engine.accumulate_sites(part[:n1], part[n1:], rng, nbins, kbox,
                                          self._frame_out(self.results.count[k], "count", k))

    def _normalise(self, res):
        res.indices = [[ag1.indices, ag2.indices] for ag1, ag2 in self.ags]
        res.rdf = [self._normalised(count) for count in res.count]
        self._set_densities(res)

    def _density_sizes(self):
        return [[len(a), len(b)] for a, b in self.ags]

    def _output_parameters(self):
        return {"group_sizes": [[len(a), len(b)] for a, b in self.ags], "method": "sites"}

    @classmethod
    def _curves(cls, results, parameters, *, sites=None):
        """One line per site pair (`sites`: ``(k, i, j)`` triples: pair of groups `k`, atom
        `i` of its first group, atom `j` of its second); by default every site pair when
        there are at most :data:`MAX_SITE_LINES`, else the mean of each pair of groups."""
        counts, n_frames = results.count, parameters["n_frames"]
        n_sites = sum(int(np.prod(np.shape(c)[:2])) for c in counts)
        curves = []
        if sites is None and n_sites > MAX_SITE_LINES:
            for k, count in enumerate(counts):
                y = np.asarray(results.rdf[k]).mean(axis=(0, 1))
                sem = (block_sem(np.asarray(results.block_rdf[k]).mean(axis=(1, 2)))
                       if "block_rdf" in results else None)
                cn = np.cumsum(np.asarray(count).sum(axis=1), axis=-1).mean(axis=0) / n_frames
                curves.append(Curve(f"ags[{k}]: mean of {count.shape[0]}×{count.shape[1]} "
                                    "site pairs", y, sem, cn))
            return curves
        if sites is None:
            sites = [(k, i, j) for k, c in enumerate(counts)
                     for i in builtins_range(c.shape[0]) for j in builtins_range(c.shape[1])]
        for k, i, j in sites:
            idx_i = int(np.asarray(results.indices[k][0])[i])
            idx_j = int(np.asarray(results.indices[k][1])[j])
            sem = results.rdf_sem[k][i, j] if "rdf_sem" in results else None
            cn = np.cumsum(counts[k][i, j]) / n_frames
            curves.append(Curve(f"ags[{k}]: atom {idx_i} – atom {idx_j}",
                                results.rdf[k][i, j], sem, cn))
        return curves

    def get_cdf(self):
        r"""Calculate the cumulative counts for all sites.

        :math:`N_{ij}(r_k) = \sum_{k' \le k} n_{ij,k'} / N_\mathrm{frames}`; returned and
        stored in :attr:`results.cdf`.

        Returns
        -------
        cdf : list
            list of arrays with the same structure as :attr:`results.rdf`
        """
        need = self._histogram_bytes()
        avail = available_memory_bytes()
        if avail is not None and need > avail:
            raise self._memory_error(need, avail, "results.cdf, on top of the results of "
                                     "the run", "")
        cdf = []
        for count in self.results.count:
            c = np.cumsum(count, axis=2)
            c /= self.n_frames  # in place: one array per pair of groups
            cdf.append(c)
        self.results.cdf = cdf
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


builtins_range = range


def _site_labels(res):
    """CSV label columns of the site pairs: pair of groups, positions and atom indices."""
    groups, ii, jj, ai, aj = [], [], [], [], []
    for k, count in enumerate(res.count):
        i, j = np.indices(np.shape(count)[:2])
        i, j = i.ravel(), j.ravel()
        groups.append(np.full(i.size, k))
        ii.append(i)
        jj.append(j)
        ai.append(np.asarray(res.indices[k][0])[i])
        aj.append(np.asarray(res.indices[k][1])[j])
    cat = np.concatenate
    return {
        "group_pair": ([str(v) for v in cat(groups).tolist()],
                       "index of the pair of groups in ags"),
        "i": ([str(v) for v in cat(ii).tolist()], "atom of the first group (position)"),
        "j": ([str(v) for v in cat(jj).tolist()], "atom of the second group (position)"),
        "index_i": ([str(v) for v in cat(ai).tolist()], "atom index (Atom.index)"),
        "index_j": ([str(v) for v in cat(aj).tolist()], "atom index (Atom.index)"),
    }
