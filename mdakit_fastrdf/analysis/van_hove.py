r"""The van Hove function :math:`G(r, t)`: its self part :math:`G_s(r, t)` from the
atoms' displacements, and its distinct part :math:`G_d(r, t)` from the pair histograms
between the positions at :math:`t_0` and at :math:`t_0 + t` (the package's kernels, CPU or
GPU).

Frame-parallel by time origins: each part of a run keeps the positions of its frames and of
the next ``max(lags)`` frames (its halo), and histograms the origins among its own frames
on its worker's device. The counts are integers summed over the parts, so the results do
not depend on the backend, the split or the device.
"""

from __future__ import annotations

import numpy as np
from MDAnalysis.analysis.results import Results

from ..engine import NO_BOX, prepare_box
from .base import PairHistogramBase, PairLayout
from .boxes import BOX_FIELDS, BoxStatistics
from .checks import check_atomgroup
from .coords import prepare_coordinates
from .declarations import Command, Curve, Field, Option, OutputSpec
from . import dynamics
from .exclusions import exclusion_labels
from .histograms import normalise_counts, shell_volumes
from .memory import available_memory_bytes
from .species import group_species

__all__ = ["VanHove"]

class VanHove(dynamics.CorrelationRun, BoxStatistics, PairHistogramBase):
    r"""Self and distinct van Hove functions of atom groups, per species.

    The self part, over the atoms :math:`i` of species :math:`a` of `g1` and the time
    origins :math:`t_0`,

    .. math::

        G_{s,a}(r, t) = \frac{1}{N_a} \Bigl\langle \sum_{i \in a}
            \delta\bigl(\mathbf{r} - [\mathbf{r}_i(t_0 + t) - \mathbf{r}_i(t_0)]\bigr)
            \Bigr\rangle_{t_0}
            \approx \frac{n_{a,k}(t)}{N_{t_0}\, N_a\, V_k}
            \quad (\text{\AA}^{-3}),

    with :math:`n_{a,k}(t)` the displacements of length in bin :math:`k` of volume
    :math:`V_k = \tfrac{4\pi}{3}(r_{k+1}^3 - r_k^3)`, from positions made whole across the
    box (:func:`~.dynamics.unwrap_positions`); :math:`\int 4\pi r^2 G_s\,dr = 1`. The
    distinct part, normalised as :class:`~mdakit_fastrdf.InterRDF` normalises
    :math:`g(r)`,

    .. math::

        G_{d,ab}(r, t) = \frac{\langle V \rangle}{N_a N_b - N_{a \cap b}}
            \frac{n_{ab,k}(t)}{N_{t_0}\, V_k},

    where :math:`n_{ab,k}(t)` counts the pairs :math:`i \in a`, :math:`j \in b`,
    :math:`i \neq j`, whose distance :math:`|\mathbf{r}_j(t_0 + t) - \mathbf{r}_i(t_0)|`
    (minimum image in the box of :math:`t_0`) falls in bin :math:`k`, summed over the
    origins, :math:`\langle V \rangle` the mean volume of the origins' boxes, and
    :math:`N_{a \cap b}` the atoms in both groups. At :math:`t = 0`,
    :math:`G_{d}(r, 0)` is :math:`g(r)` without the atoms' own pairs: with ``g2=None`` it
    equals ``InterRDF(g1, g1, exclusion_block=(1, 1))``'s ``results.rdf`` bit for bit;
    for an ideal gas it is 1 at every lag, and as :math:`t \to \infty` it tends to 1 in
    any fluid (:math:`\rho\, G_d` is the van Hove distinct density of Hansen and McDonald,
    *Theory of Simple Liquids*, 4th ed., Academic Press, 2013, §7.2).

    Parameters
    ----------
    g1 : AtomGroup
        The atoms at the time origins (and the atoms of the self part).
    g2 : AtomGroup, optional
        The atoms at :math:`t_0 + t` (default: `g1`). Not with `by`.
    lags : int or sequence of int
        Lags in analysed frames: an int ``L`` means ``0 .. L``.
    nbins : int
        Number of bins (default 75).
    range : (float, float)
        Distance range in Å (default ``(0.0, 15.0)``); bins as :func:`numpy.histogram`.
    by : str, mapping, callable or list of AtomGroups, optional
        Species of `g1`, as :class:`~mdakit_fastrdf.SpeciesRDF` groups them; the distinct
        part then holds every ordered species pair :math:`(a, b)`. Default: `g1` as one
        species (and `g2` as the other).
    origins : int
        Every ``origins``-th analysed frame is a time origin (default 1: all).
    self_part, distinct : bool
        Compute :math:`G_s` and :math:`G_d` (both by default).
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}
        Where the distinct pair histograms run (the process that calls :meth:`run`).
    precision : {'double', 'single'}
        Arithmetic of the distinct distances (``'double'``, InterRDF's, by default).
    n_threads : int, optional
        CPU threads of the distinct pair histograms.
    method : {'auto', 'allpairs', 'cells'}
        How the distinct pairs are found (the same counts).

    Attributes
    ----------
    results.bins, results.edges : numpy.ndarray
        Bin centres and edges (Å).
    results.lags, results.times : numpy.ndarray
        Lags (frames) and times (ps: the analysed frames' spacing times the lag).
    results.n_origins : numpy.ndarray
        Time origins of each lag.
    results.g_self : numpy.ndarray
        ``(n_species, n_lags, nbins)`` :math:`G_{s,a}(r, t)` (Å⁻³);
        ``results.g_self_total`` over all atoms of `g1`.
    results.g_distinct : numpy.ndarray
        ``(n_pairs, n_lags, nbins)`` :math:`G_{d,ab}(r, t)`, pairs ``results.pairs``
        (indices into ``results.species``; ``[(0, 1)]``, the groups `g1` and `g2`, without
        `by`); ``results.count_distinct`` their integer counts.

    Raises
    ------
    ValueError
        No periodic box, lags beyond the run, frames not evenly spaced in time, a stride too
        long to unwrap positions, `g2` with `by`, overlapping species, or more memory than
        the machine has.

    Notes
    -----
    Frame-parallel by time origins: every part of the run (a worker's share of the frames,
    on any backend) also reads the next ``max(lags)`` frames, keeps the positions, and
    histograms the time origins among its own frames, on its worker's device (a GPU
    worker's GPU) with its threads: for each lag and origin, one kernel call over
    :math:`N_1 + N_2` positions. A part holds at least twice the halo's frames (longer
    lags make fewer parts). The parts' integer counts add up to the serial run's.

    Examples
    --------
    >>> from mdakit_fastrdf import VanHove
    >>> ow = u.select_atoms("name OW")                                    # doctest: +SKIP
    >>> vh = VanHove(ow, lags=[0, 5, 10], range=(0.0, 8.0)).run()          # doctest: +SKIP
    >>> vh.results.g_distinct[0, 0]   # = g(r) of the oxygens at t = 0     # doctest: +SKIP
    """

    coordinates = "mdanalysis"

    outputs = OutputSpec(fields=(
        Field("bins", "Å", "bin centre r"),
        *dynamics.LAG_FIELDS,
        Field("n_origins", "", "time origins of each lag", integer=True),
        Field("g_self", "Å^-3", "self G_s(r, t) of each species"),
        Field("g_self_total", "Å^-3", "self G_s(r, t) of all atoms of g1"),
        Field("g_distinct", "", "distinct G_d(r, t) of each species pair, g(r) at t = 0"),
        Field("count_distinct", "", "pairs counted in each bin, over the origins",
              integer=True),
        *BOX_FIELDS[1:],
    ))

    command = Command(
        name="vanhove",
        help="van Hove functions: self G_s(r, t) and distinct G_d(r, t)",
        **dynamics.DEMO,
        options=(
            Option(("--nbins",), "nbins", {"type": int, "help": "bins (default: 75)"}),
            Option(("--range",), "range", {"nargs": 2, "type": float,
                                            "metavar": ("RMIN", "RMAX"),
                                            "help": "distance range in Å (default: 0 15)"},
                   convert=tuple),
            *dynamics.command_options(),
            Option(("--no-distinct",), "distinct", {"action": "store_const", "const": False,
                                                     "help": "skip the distinct part"}),
        ),
    )

    def __init__(self, g1, g2=None, *, lags, nbins=75, range=(0.0, 15.0), by=None,
                 origins=1, self_part=True, distinct=True, **kwargs):
        check_atomgroup(g1, "g1")
        dynamics.check_static(g1, "g1")
        if g2 is not None:
            check_atomgroup(g2, "g2")
            dynamics.check_static(g2, "g2")
            if g2.universe is not g1.universe:
                raise ValueError("g2 must belong to the Universe of g1")
        self._init_histograms(g1.universe, nbins, range, "none", kwargs=kwargs)
        self._init_correlation(lags, origins, self_part=self_part, distinct=distinct)
        self.g1, self.g2, self.by = g1, (g1 if g2 is None else g2), by
        if by is None:
            self.species = ["g1"] if g2 is None else ["g1", "g2"]
            self._self_groups = [g1]
            t0_groups, t_groups = [g1], [self.g2]
        else:
            if g2 is not None:
                raise ValueError("by: species are those of g1 (paired with themselves); "
                                 "give g2=None with by, or no by with g2")
            species = group_species(g1, by)
            for label, group in species:
                dynamics.check_static(group, f"by: species {label!r}")
            species.sort(key=lambda s: (-len(s[1]), str(s[0])))
            self.species = [label for label, _ in species]
            self._self_groups = t0_groups = t_groups = [g for _, g in species]
            ix = np.concatenate([g.ix for g in t0_groups])
            if len(np.unique(ix)) != len(ix):
                raise ValueError("by: the species must not overlap (an atom in two species "
                                 "would be counted twice)")
        self._t0_groups, self._t_groups = t0_groups, t_groups
        # the rows each frame keeps: every atom of either group once
        self._atoms = np.unique(np.concatenate([g.ix for g in (g1, self.g2)]))
        box = prepare_box(g1.universe.trajectory.ts.dimensions)
        if box.kind == NO_BOX:
            raise ValueError("VanHove needs a periodic box: the current frame has none")

    # -- the shared base's hooks ----------------------------------------------------------
    def _layout(self):
        return PairLayout(ix=self._atoms.copy(),
                          offsets=np.array([0, len(self._atoms)], dtype=np.int64),
                          pairs=np.zeros((1, 2), dtype=np.int32))

    def _density_sizes(self):
        return [len(g) for g in self._self_groups]

    # -- parts of the run: each histograms its own time origins (the base's halo) -------
    def _halo(self):
        """The longest lag: a part's own time origins reach that far beyond it."""
        return int(self.lags[-1]) if getattr(self, "lags", None) is not None else 0

    #: the parts' own results (:meth:`_finish_part`) and how they merge
    part_results = {"count_self": "sum", "count_distinct": "sum", "own_index": "concatenate",
                    "own_time": "concatenate", "own_volume": "concatenate"}

    def _start_part(self, n):
        n_atoms, n_self = len(self._atoms), sum(len(g) for g in self._self_groups)
        need = n * (12 * n_atoms + (24 * n_self if self.self_part else 0) + 48)
        free = available_memory_bytes()
        if free is not None and need > 0.8 * free:
            raise MemoryError(
                f"VanHove keeps {need / n / 2**20:.1f} MiB a frame ({need / 2**30:.1f} GiB "
                f"for this worker's {n} frames), more than this machine has free "
                f"({free / 2**30:.1f} GiB); analyse fewer frames or fewer atoms, or run on "
                f"more workers (each holds its part of the frames)")
        self._kept_positions = np.empty((n, n_atoms, 3), dtype=np.float32)
        self._kept_dims = np.empty((n, 6), dtype=np.float32)
        self._kept_volume = np.empty(n)
        self._kept_time = np.empty(n)

    def _accumulate(self, coords, box):  # (a frame is kept, and correlated at the part's end)
        ts = self._ts
        if box.kind == NO_BOX:
            raise ValueError(f"frame {ts.frame} has no periodic box: VanHove needs one in "
                             f"every frame")
        i = self._frame_index
        self._kept_positions[i] = coords
        self._kept_dims[i] = ts.dimensions
        self._kept_volume[i] = ts.volume
        self._kept_time[i] = ts.time

    # -- the physics ----------------------------------------------------------------------
    def _rows_of(self, groups):
        """The rows (in the kept positions) of each group's atoms, and the offsets."""
        rows = [np.searchsorted(self._atoms, g.ix) for g in groups]
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        return rows, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def _origins(self, index, n_own, tau):
        """Local positions of this part's time origins of lag `tau`: its own frames whose
        position in the run is a multiple of ``origins``, with ``t0 + tau`` held here."""
        p = np.arange(n_own, dtype=np.int64)
        return p[(index[:n_own] % self.origins == 0) & (p + tau < len(index))]

    def _finish_part(self, index, n_own):
        """This part's integer counts over its own origins, and its own frames' times and
        volumes (in ``results``)."""
        res = self.results
        res.own_index = np.asarray(index[:n_own], dtype=np.int64)
        res.own_time = self._kept_time[:n_own].copy()
        res.own_volume = self._kept_volume[:n_own].copy()
        origins = [self._origins(index, n_own, int(tau)) for tau in self.lags]
        if self.self_part:
            rows = np.concatenate(self._rows_of(self._self_groups)[0])
            kept = self._kept_positions
            if len(rows) != kept.shape[1] or np.any(rows != np.arange(len(rows))):
                kept = kept[:, rows]  # (the self groups' atoms, when not all in order)
            pos = dynamics.unwrap_positions(kept, self._kept_dims, self.worker_threads)
            # (every lag's origins: those of lag 0 with t0 + lag held here)
            res.count_self = self._self_counts(pos, self._origins(index, n_own, 0),
                                               self.bin_edges)
        if self.distinct:
            res.count_distinct = self._distinct_counts(origins)
        self._kept_positions = self._kept_dims = None

    def _self_counts(self, pos, origins, edges):
        """``(n_species, n_lags, nbins)`` int64 counts of the displacement lengths (`pos`:
        the self groups' atoms, made whole; `origins`: this part's, which every lag shares
        while the lag's frame is held here)."""
        from ..engine.displacements import displacement_histogram

        sizes = np.array([len(g) for g in self._self_groups], dtype=np.int64)
        species_of_row = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        out = np.zeros((len(sizes), len(self.lags), len(edges) - 1), dtype=np.int64)
        displacement_histogram(pos, origins, self.lags, species_of_row, len(sizes), edges, out,
                               self.worker_threads)
        return out

    def _distinct_pairs(self):
        """Species pairs of the kernels: species a of the positions at t0 (rows of species
        0 .. s-1), b of those at t0 + t (species s ..)."""
        s = len(self._t0_groups)
        return np.array([(a, s + b) for a in range(s) for b in range(len(self._t_groups))],
                        dtype=np.int32).reshape(-1, 2)

    def _distinct_counts(self, origins):
        """``(n_pairs, n_lags, nbins)`` uint64 pair counts, one kernel call per lag and
        origin (this worker's engine: its device and threads)."""
        t0_rows, off0 = self._rows_of(self._t0_groups)
        t_rows, off1 = self._rows_of(self._t_groups)
        rows0, rows1 = np.concatenate(t0_rows), np.concatenate(t_rows)
        offsets = np.concatenate([off0, off0[-1] + off1[1:]]).astype(np.int64)
        labels = exclusion_labels(self._atoms[rows0], self._atoms[rows1], False)
        pairs = self._distinct_pairs()
        sizes = (len(rows0), len(rows1))
        counts = np.zeros((len(self.lags), len(pairs), len(self.bin_edges) - 1),
                          dtype=np.uint64)
        pos, dims = self._kept_positions, self._kept_dims
        boxes = {}
        coords = np.empty((len(rows0) + len(rows1), 3), dtype=np.float32)
        for j, tau in enumerate(self.lags):
            out = counts[j]
            for t0 in origins[j]:
                box = boxes.get(t0)
                if box is None:
                    box = boxes[t0] = prepare_box(dims[t0])
                np.take(pos[t0], rows0, axis=0, out=coords[:len(rows0)])
                np.take(pos[t0 + tau], rows1, axis=0, out=coords[len(rows0):])
                used = prepare_coordinates(self.coordinates, box, coords, sizes, self.rmax)
                self.engine.accumulate(coords, offsets, pairs, self.bin_edges, used, labels,
                                        out)
        self.engine.synchronize()
        self._device_used = self.engine.device_used
        return np.ascontiguousarray(counts.transpose(1, 0, 2))

    def _normalise(self, res):
        order = np.argsort(res.own_index, kind="stable")
        n_frames = len(order)
        if not np.array_equal(res.own_index[order], np.arange(n_frames)):
            raise RuntimeError("VanHove: the parts' own frames do not cover the run once")
        time, volume = res.own_time[order], res.own_volume[order]
        lags = dynamics.check_lags(self._lags_asked, n_frames)
        step = dynamics.time_step(time)
        edges = np.asarray(res.edges, dtype=np.float64)
        starts = [dynamics.origin_frames(n_frames, tau, self.origins) for tau in lags]
        n_origins = np.array([len(t0) for t0 in starts], dtype=np.int64)
        out = Results(lags=lags, times=lags * step, n_origins=n_origins,
                      species=list(self.species))
        if self.self_part:
            counts = res.count_self
            sizes = np.array(self._density_sizes(), dtype=np.float64)
            vol = shell_volumes(edges)
            out.g_self = counts / (n_origins[None, :, None] * sizes[:, None, None] * vol)
            out.g_self_total = counts.sum(axis=0) / (n_origins[:, None] * sizes.sum() * vol)
        if self.distinct:
            counts, pairs = res.count_distinct, self._distinct_pairs()
            # (indices into results.species: g1 and g2 without by, else the species twice)
            same = len(self.species) == len(self._t0_groups)  # (g2 is not another species)
            out.pairs = pairs - np.array([0, len(self._t0_groups) if same else 0],
                                         dtype=np.int32)
            groups = self._t0_groups + self._t_groups
            n_pairs = []
            for a, b in pairs:
                both = np.intersect1d(groups[a].ix, groups[b].ix, assume_unique=True)
                n_pairs.append(len(groups[a]) * len(groups[b]) - len(both))
            g = np.empty(counts.shape)
            for j, t0 in enumerate(starts):
                volume_cum = 0  # (summed frame by frame, as InterRDF sums ts.volume)
                for v in volume[t0]:
                    volume_cum += v
                g[:, j] = normalise_counts(counts[:, j].astype(np.float64), "rdf",
                                           n_origins[j], edges, volume_cum, n_pairs)
            out.count_distinct = counts
            out.g_distinct = g
        # the run's own frames (a halo's frames are counted by their own part)
        volume_cum = 0.0
        for v in volume:
            volume_cum += v
        for name in ("own_index", "own_time", "own_volume", "count_self", "count_distinct",
                     "count_uint64"):
            res.pop(name, None)
        res.update(out)
        res.box_volume_cum = volume_cum
        from .boxes import number_densities

        rho = number_densities(self._density_sizes(), volume_cum, n_frames)
        if rho is not None:
            res.rho = rho

    @classmethod
    def _plot_axes(cls, results, parameters):
        from .declarations import PlotAxes

        r = np.asarray(results.bins, dtype=np.float64)
        return PlotAxes(x=r, xlabel="r (Å)", ylabel="G(r, t)", xlim=(0.0, float(r[-1])))

    @classmethod
    def _curves(cls, results, parameters, *, self_part=None, distinct=True):
        """For every lag the first pair's :math:`G_d(r, t)`; the total self
        :math:`G_s(r, t)` (Å⁻³, another scale) with ``self_part=True`` or without a
        distinct part."""
        if self_part is None:
            self_part = not (distinct and "g_distinct" in results)
        curves = []
        for j, t in enumerate(np.asarray(results.times)):
            if distinct and "g_distinct" in results:
                curves.append(Curve(f"G$_d$, t = {t:.3g} ps",
                                    np.asarray(results.g_distinct)[0, j]))
            if self_part and "g_self_total" in results:
                curves.append(Curve(f"G$_s$, t = {t:.3g} ps",
                                    np.asarray(results.g_self_total)[j]))
        return curves

    def _output_parameters(self):
        return {"species": [str(s) for s in self.species], "origins": self.origins,
                "self_part": self.self_part, "distinct": self.distinct,
                "by": self.by if isinstance(self.by, str) or self.by is None else "custom"}
