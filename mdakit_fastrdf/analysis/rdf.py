r"""Radial distribution functions on compiled pair-distance histogram kernels.

:class:`InterRDF` is a drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF`:
same parameters, defaults, results and errors; only the import line changes.
"""

from __future__ import annotations

import warnings

import numpy as np

from .base import PairHistogramBase, PairLayout
from .blocks import frame_sum
from .boxes import BOX_FIELDS, BoxStatistics
from .centres import check_connected, compound_centres, compound_rows  # noqa: F401
from .checks import (
    EXCLUDE_SAME,
    deprecated_result,
    check_atomgroup,
    check_exclude_same,
    check_norm,
    check_normalization_mode,
    is_updating,
)
from .declarations import Curve, Field, OutputSpec, Table, histogram_fields, shell_fields
from .docstrings import render_docs
from .exclusions import block_labels, check_block_sizes, check_exclusion_block, exclusion_labels
from .rdf_command import RDF_COMMAND
from .shells import FirstShell, first_shell, running_coordination

__all__ = ["FirstShell", "InterRDF", "first_shell"]

_DISTANCE_BACKENDS = ("serial", "openmp", "distopia")


@render_docs
class InterRDF(BoxStatistics, PairHistogramBase):
    r"""Radial distribution function between two groups of atoms.

    A drop-in replacement for :class:`MDAnalysis.analysis.rdf.InterRDF`: it histograms the
    minimum-image distances between every atom of `g1` and every atom of `g2` in each frame,
    with the same parameters, defaults, results and normalisations, but in a compiled kernel
    (C++ with threads, SIMD and cache blocking on the CPU; CUDA on NVIDIA GPUs) instead of a neighbour search followed
    by :func:`numpy.histogram`.

    Parameters
    ----------
    g1 : AtomGroup or UpdatingAtomGroup
        First group of atoms. An UpdatingAtomGroup
        (``u.select_atoms(..., updating=True)``) is selected again in every frame: each
        frame histograms the atoms it holds then, and the normalisation takes the sizes of
        each frame (Notes).
    g2 : AtomGroup or UpdatingAtomGroup
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
    compute : ComputeOptions, optional
        Keyword only. `device`, `precision`, `n_threads` and `method` as one
        :class:`~mdakit_fastrdf.analysis.compute.ComputeOptions`, to build once and give to
        several analyses (instead of the four keywords). Every analysis of the package takes it.
    normalization_mode : {'exact', 'finite_size'}, optional
        Keyword only. ``'exact'`` (default): MDAnalysis's normalisation. ``'finite_size'``
        (freud's name and factor): g(r) of a group with itself is rescaled by
        :math:`N/(N-1)`, i.e. normalised by the :math:`N(N-1)` pairs of distinct atoms, so
        that it tends to 1 at large :math:`r` in a small system (see Notes). Needs
        ``norm='rdf'``, `g1` and `g2` holding the same atoms, and no `exclusion_block`
        (whose :math:`N_\mathrm{pairs}` already leaves the excluded pairs out).
    compound : {'group', 'residues', 'segments', 'molecules', 'fragments'} or tuple, optional
        Keyword only. ``None`` (default): the RDF between atoms, as in MDAnalysis. A name:
        the RDF between the centres of the compounds of `g1` and those of `g2` (one centre
        per residue, segment, molecule or fragment of the group's atoms, or one for the
        whole group with ``'group'``), computed in every frame as MDAnalysis's
        ``AtomGroup.center(weights, compound=..., unwrap=...)`` does. A pair
        ``(compound1, compound2)`` chooses for each side, ``None`` meaning its atoms, e.g.
        ``(None, 'residues')`` for atoms of `g1` around residue centres of `g2`. With
        compounds, :math:`N_A` and :math:`N_B` of the normalisation, `exclusion_block`,
        ``results.rho`` and ``results.coordination`` count centres, not atoms;
        `exclude_same` is not available (a centre is no atom of a residue, segment or
        chain). ``'molecules'`` needs molecule numbers in the topology (e.g. a TPR),
        ``'fragments'`` bonds. See "RDFs between molecular centres" in the docs.
    center : {'geometry', 'mass'}, optional
        Keyword only. With `compound`: the centre of geometry (default) or of mass of each
        compound.
    unwrap : bool, optional
        Keyword only. With `compound`: make each compound whole before its centre is taken
        (default ``True``), as MDAnalysis's ``unwrap`` (``make_whole`` per compound) does,
        vectorised: each compound's bond tree is built once, rooted at its first atom, and
        every frame places each depth of all the trees at the minimum image of its bonded
        parent (:class:`~mdakit_fastrdf.analysis.centres.CompoundCentres`; the same
        centres as MDAnalysis 2.11, about 200x faster). It needs bonds in the topology (or
        ``u.guess_TopologyAttrs(to_guess=["bonds"])``) that connect the atoms of every
        compound among themselves (a water residue with an unbonded virtual site is not
        connected: leave the site out of the group). ``False``: take the positions as they
        are, for trajectories whose molecules are whole.
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
    results.cdf : numpy.ndarray
        Cumulative count per frame, :math:`\sum_{k' \le k} n_{k'} / N_\mathrm{frames}`:
        the pairs within the upper edge of bin :math:`k` (as ``InterRDF_s.get_cdf``).
    results.coordination : numpy.ndarray
        Running coordination number, the mean number of `g2` atoms within the upper edge
        of bin :math:`k` of a `g1` atom: ``cdf / len(g1)`` (freud's ``n_r``).
    results.n_pairs : float
        :math:`N_\mathrm{pairs}` of ``norm='rdf'`` (below), whatever `norm`.
    results.frame_group_sizes : numpy.ndarray
        Only with an UpdatingAtomGroup: ``(n_frames, 3)``, each frame's :math:`N_A`,
        :math:`N_B` and pairs (Notes), in frame order.
    results.rho : numpy.ndarray
        ``(2,)``: the frame-averaged number densities of `g1` and `g2` in Å⁻³,
        :math:`\rho_X = N_X / \langle V \rangle` (every `norm`; absent when a frame has no
        box). They convert between the normalisations (see Notes).
    results.box_volume_cum : float
        Sum of the box volumes of all frames, whatever `norm` (NaN when a frame has no box).
    results.min_box_widths : numpy.ndarray
        ``(3,)``: the smallest perpendicular width of each box axis over the frames (Å).

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
    ``normalization_mode='finite_size'`` uses :math:`N_\mathrm{pairs} = N(N - 1)` for a group
    of :math:`N` atoms with itself: g(r) times :math:`N/(N-1)`, freud's
    ``normalization_mode='finite_size'``. Without it, an ideal gas of :math:`N` atoms
    gives :math:`g \to (N-1)/N` at large :math:`r`, because an atom does not see itself.

    The densities :math:`\rho_1 = N_A/\langle V \rangle` and :math:`\rho_2 = N_B/\langle V
    \rangle` use the same :math:`\langle V \rangle` (the mean of the frames' volumes, not the
    mean of :math:`N/V`), so that the normalisations convert exactly:
    :math:`g_\mathrm{density} = g_\mathrm{rdf}\, N_\mathrm{pairs} / \langle V \rangle`,
    which is :math:`N_A\, \rho_2\, g_\mathrm{rdf}` without exclusions. The running
    coordination number is
    :math:`n(r_{k+1}) = \sum_{k' \le k} n_{k'} / (N_\mathrm{frames} N_A)`
    :math:`= \rho_2 \int_0^{r_{k+1}} g_\mathrm{rdf}(r)\, 4\pi r^2 dr` (exact norm, no
    exclusions); :func:`first_shell` finds the first minimum of g(r) and
    :math:`n(r_\mathrm{min})`.

    **Updating groups.** With an UpdatingAtomGroup the atoms of frame :math:`f` are
    :math:`N_{A,f}` and :math:`N_{B,f}`; the counts are those of each frame's atoms, summed
    (the same as running the analysis frame by frame on the static selection of that frame
    and adding the counts), and the averages over the frames replace the sizes:
    :math:`N_\mathrm{pairs} = \frac{1}{N_\mathrm{frames}} \sum_f (N_{A,f} N_{B,f} - a\,b\,
    N_{A,f}/a)`, :math:`\rho_X = \langle N_X \rangle / \langle V \rangle` and the
    coordination number divides by :math:`\langle N_A \rangle`. This is the pair density
    accumulated frame by frame (as LAMMPS's ``compute rdf`` with dynamic groups), and it is
    exactly the static normalisation when the selection does not change. ``exclude_same``
    and ``exclusion_block`` apply in each frame (the blocks must divide each frame's sizes);
    ``compound`` and ``normalization_mode='finite_size'`` cannot be combined with an
    UpdatingAtomGroup. ``results.frame_group_sizes`` holds each frame's
    :math:`(N_{A,f}, N_{B,f}, N_{A,f} N_{B,f} - a\,b\,N_{A,f}/a)`.

    Beyond half the smallest perpendicular width of the box the RDF is incomplete (a
    sphere of that radius reaches its own periodic images, and each pair is counted only
    at its minimum-image distance): :meth:`run` then warns once (UserWarning), naming the
    width.

    When `g1` and `g2` are the same group every ordered pair is counted, ``(i, j)`` and
    ``(j, i)``, and each atom with itself at distance 0 (in the first bin when ``rmin`` is 0)
    unless an ``exclusion_block`` removes it, exactly as MDAnalysis does; the kernel computes
    each unordered pair once.

    Distances are taken between positions wrapped into the primary cell and with the
    difference vector rounded to float32, as MDAnalysis does; the minimum image is exact for
    every box and every distance up to ``rmax``.

    With `compound` the rows of a frame are the centres :math:`\mathbf{c}_I` of the
    compounds :math:`I` (MDAnalysis's ``AtomGroup.center``, in float64, then rounded to
    float32 as every position is),

    .. math::

        \mathbf{c}_I = \frac{\sum_{i \in I} w_i \mathbf{r}_i}{\sum_{i \in I} w_i},
        \qquad w_i = 1 \ (\text{geometry}) \text{ or } m_i \ (\text{mass}),

    with the positions :math:`\mathbf{r}_i` of a compound made whole first (`unwrap`). The
    centres of whole compounds may lie outside the primary cell; they are prepared as any
    position is (wrapped, or taken through the minimum image), so their distances are the
    minimum-image distances all the same. Then :math:`N_A` and :math:`N_B` above are the
    numbers of centres.

    Examples
    --------
    ${ADK_WATER}
    >>> from mdakit_fastrdf import InterRDF
    >>> ow = u.select_atoms("name OW")
    >>> rdf = InterRDF(ow, ow, nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1)).run()
    >>> rdf.results.bins.shape, rdf.results.rdf.shape
    ((75,), (75,))
    >>> rho_o = rdf.results.rho[0]  # water oxygens per Å³
    >>> shell = rdf.first_shell()  # first minimum and coordination number

    Frames can be split over processes with MDAnalysis's parallel backends; every backend
    gives the same integer counts::

        rdf = InterRDF(ow, ow).run(backend="multiprocessing", n_workers=4)
    """

    coordinates = "mdanalysis"
    #: the main command of ``mdakit-fastrdf`` (:mod:`.rdf_command`)
    command = RDF_COMMAND
    outputs = OutputSpec(
        fields=histogram_fields() + shell_fields() + (
            Field("n_pairs", "pairs", "N_pairs of norm='rdf'"),
        ) + BOX_FIELDS,
        tables=(Table(fields=("rdf", "count_uint64", "cdf", "coordination")),),
    )
    _result_arrays = 4

    def __init__(self, g1, g2, nbins=75, range=(0.0, 15.0), norm="rdf",
                 exclusion_block=None, exclude_same=None, backend="serial", *,
                 normalization_mode="exact", compound=None, center="geometry", unwrap=True,
                 **kwargs):
        self._init_pairs(g1, g2, nbins, range, norm, exclusion_block=exclusion_block,
                         exclude_same=exclude_same, backend=backend,
                         normalization_mode=normalization_mode, compound=compound,
                         center=center, unwrap=unwrap, kwargs=kwargs)

    def _init_pairs(self, g1, g2, nbins, range, norm, *, exclusion_block=None,
                    exclude_same=None, backend="serial", normalization_mode="exact",
                    compound=None, center="geometry", unwrap=True, kwargs=None):
        """Check and store what the pair RDFs take (InterRDF's parameters); `kwargs` are
        the keywords the caller did not name (:meth:`_init_histograms`). A class on
        InterRDF's pairs with fewer parameters calls this with its own."""
        check_atomgroup(g1, "g1", updating=True)
        check_atomgroup(g2, "g2", updating=True)
        if g1.universe is not g2.universe:
            raise ValueError("g1 and g2 must belong to the same Universe")
        # MDAnalysis's order of checks: exclude_same, then norm, then the rest
        check_exclude_same(exclude_same)
        if exclude_same is not None and exclusion_block is not None:
            raise ValueError(
                "The exclude_same argument to InterRDF cannot be used with exclusion_block."
            )
        check_norm(norm)
        self._init_histograms(g1.universe, nbins, range, norm, kwargs=kwargs)
        self.g1 = g1
        self.g2 = g2
        self._set_compounds(compound, center, unwrap, exclude_same)
        self._exclusion_block = exclusion_block
        self.exclude_same = EXCLUDE_SAME.get(exclude_same)
        self._updating = is_updating(g1) or is_updating(g2)
        if exclusion_block is not None:
            check_exclusion_block(exclusion_block)
            if not self._updating:  # (an UpdatingAtomGroup: checked in every frame)
                check_block_sizes(exclusion_block, *self._n_rows)
        if not isinstance(backend, str) or backend.lower() not in _DISTANCE_BACKENDS:
            raise ValueError(
                f"backend (the distance backend of MDAnalysis) must be one of "
                f"'serial', 'OpenMP', 'distopia'; got {backend!r}. For parallel frames use "
                f"run(backend='multiprocessing' or 'dask')."
            )
        self.backend = backend
        self.normalization_mode = check_normalization_mode(normalization_mode, self.norm,
                                                           "InterRDF")
        if self._updating:
            self._check_updating()
        elif self.normalization_mode == "finite_size":
            self._check_finite_size()

    def _check_updating(self):
        """What an UpdatingAtomGroup cannot be combined with (each a ValueError naming the
        fix): the sizes of its frames are accumulated pair by pair, but compound centres,
        exclusion blocks and finite_size assume the same atoms in every frame."""
        if self._has_compounds():
            raise ValueError(
                f"compound={self.compound!r} cannot be combined with an UpdatingAtomGroup: the "
                "compounds of a selection that changes every frame are not defined. Pass static "
                "groups (e.g. g1.atoms), or select the centres' atoms per frame yourself")
        if self.normalization_mode == "finite_size":
            raise ValueError(
                "normalization_mode='finite_size' cannot be combined with an "
                "UpdatingAtomGroup; use normalization_mode='exact', whose N_pairs is then "
                "summed over the frames")

    def _set_compounds(self, compound, center, unwrap, exclude_same):
        """Check and store `compound`, `center` and `unwrap`; the number of rows (atoms or
        centres) of each group: ``self._n_rows`` (:func:`.centres.compound_rows`)."""
        self.compound, self._n_rows, self._centres = compound_rows(
            (self.g1, self.g2), compound, center, unwrap, exclude_same)
        self.center = center
        self.unwrap = bool(unwrap)

    def _has_compounds(self):
        return getattr(self, "compound", (None, None)) != (None, None)

    def _take_positions(self, ix, out):
        """The rows of the frame: the base's atom positions, or with `compound` the centres
        of the compounds (``_layout``'s rows: the centres of g1, then those of g2 unless g2
        is the same)."""
        if not self._has_compounds():
            return super()._take_positions(ix, out)
        n1 = self._n_rows[0]
        sides = [(self.g1, self._centres[0], slice(0, n1))]
        if len(out) > n1:
            sides.append((self.g2, self._centres[1], slice(n1, len(out))))
        for g, centres, rows in sides:
            out[rows] = g.positions if centres is None else centres()
        if not np.isfinite(out).all():
            raise ValueError(
                f"the centres of frame {self._ts.frame} hold NaN or infinite values (NaN or "
                "infinite coordinates, or with center='mass' a compound whose masses sum to "
                "zero); the RDF of such a frame is undefined")
        return out

    def _check_finite_size(self):
        same = (self._n_rows[0] == self._n_rows[1]
                and self.compound[0] == self.compound[1]
                and np.array_equal(np.sort(self.g1.ix), np.sort(self.g2.ix))
                and len(np.unique(self.g1.ix)) == len(self.g1))
        if not same:
            raise ValueError(
                "normalization_mode='finite_size' rescales the RDF of a group with itself "
                "(freud's factor N / (N - 1)); g1 and g2 hold different atoms, whose 'exact' "
                "normalisation already tends to 1. Use normalization_mode='exact', or pass "
                "the same group as g1 and g2.")
        if self._n_rows[0] < 2:
            raise ValueError("normalization_mode='finite_size' needs at least 2 atoms "
                             "(N / (N - 1) with N = 1)")
        if self._exclusion_block is not None:
            raise ValueError(
                f"normalization_mode='finite_size' cannot be combined with exclusion_block="
                f"{tuple(self._exclusion_block)!r}: N_pairs of norm='rdf' already leaves the "
                "excluded pairs (each atom with itself among them) out, so g(r) tends to 1; "
                "use normalization_mode='exact'")

    # -- the base class's hooks ---------------------------------------------------------
    def _layout(self):
        """Two species and one pair; one species paired with itself when g1 is g2 (the
        kernel then computes each unordered pair once and counts it twice). With an
        UpdatingAtomGroup: the atoms it selects in the current frame."""
        if getattr(self, "_updating", False):
            self._n_rows = [len(self.g1), len(self.g2)]
            if self._exclusion_block is not None:
                check_block_sizes(self._exclusion_block, *self._n_rows,
                                  frame=self._ts.frame if hasattr(self, "_ts") else None)
        n1, n2 = self._n_rows
        xa, xb = self._exclusion_block or (None, None)
        same = (np.array_equal(self.g1.ix, self.g2.ix) and xa == xb
                and self.compound[0] == self.compound[1])
        labels = None
        if self._exclusion_block is not None:
            labels = block_labels(n1, n2, self._exclusion_block, same)
        elif self.exclude_same is not None:
            la, lb = getattr(self.g1, self.exclude_same), getattr(self.g2, self.exclude_same)
            labels = exclusion_labels(la, lb, same)
        groups = [self.g1] if same else [self.g1, self.g2]
        pairs = [(0, 0)] if same else [(0, 1)]
        if not self._has_compounds():
            return PairLayout.of_groups(groups, pairs, labels, sizes=(n1, n2))
        # rows are centres (filled by _take_positions), not atoms: ix only sizes the block
        n = n1 if same else n1 + n2
        offsets = np.array([0, n1] if same else [0, n1, n], dtype=np.int64)
        return PairLayout(ix=np.arange(n, dtype=np.int64), offsets=offsets,
                          pairs=np.asarray(pairs, dtype=np.int32), labels=labels,
                          segments=((0, n, n1, n2),))

    def _allocate_counts(self, nbins):
        super()._allocate_counts(nbins)
        self.results.count_uint64 = self.results.count_uint64.reshape(nbins)

    def _frame_rows(self):
        # UpdatingAtomGroup: each frame's N_A, N_B and N_A N_B (see _n_pairs)
        rows = super()._frame_rows()
        if getattr(self, "_updating", False):
            rows["frame_group_sizes"] = (3,)
        return rows

    def _can_feed(self):
        # an updating group's rows change from frame to frame: its workers read their frames
        return type(self)._single_frame is InterRDF._single_frame and not self._updating

    def _single_frame(self):
        if not self._updating:
            return super()._single_frame()
        # the atoms the groups select in this frame, then the base's frame on them
        box = self._frame_box()
        self._relayout()
        n1, n2 = self._n_rows
        if n1 and n2:
            self._accumulate(self._frame_positions(), box)
        self._store_frame("frame_group_sizes", (n1, n2, self._n_pairs_of(n1, n2)))
        if self.norm == "rdf":
            self.results.volume_cum += self._ts.volume

    def _group_sizes(self):
        """Mean N_A and N_B per frame of this run (or block): the sizes, or with an
        UpdatingAtomGroup the means of each frame's."""
        if not getattr(self, "_updating", False):
            return self._n_rows
        sums = frame_sum(self.results.frame_group_sizes)
        return [sums[0] / self.n_frames, sums[1] / self.n_frames]

    def _frame_out(self, out, field="count_uint64", index=None):
        # the kernels write (pairs, nbins); InterRDF's counts are (nbins,)
        return super()._frame_out(out.reshape(1, -1) if out.ndim == 1 else out, field, index)

    def _n_pairs(self):
        """N_pairs of norm="rdf", as MDAnalysis computes it; with an UpdatingAtomGroup the
        mean over the frames of N_A N_B (of this run, or of one block)."""
        if getattr(self, "_updating", False):
            # (N_A N_B less the excluded pairs of each frame)
            return frame_sum(self.results.frame_group_sizes)[2] / self.n_frames
        N = self._n_pairs_of(*self._n_rows)
        if getattr(self, "normalization_mode", "exact") == "finite_size":
            nA, nB = self._n_rows
            N = nA * (nB - 1)  # N (N - 1): the ordered pairs of distinct atoms
        return N

    def _n_pairs_of(self, nA, nB):
        """N_A N_B less the pairs exclusion_block leaves out, as MDAnalysis computes it."""
        N = nA * nB
        if self._exclusion_block:
            xA, xB = self._exclusion_block
            nblocks = nA / xA
            N -= xA * xB * nblocks
        return N

    def _check_empty_frames(self, res):
        """An UpdatingAtomGroup may hold no atom in a frame: count those frames
        (``results.n_empty_frames``) and warn; a run in which every frame is empty is an
        error."""
        sizes = np.asarray(res.frame_group_sizes)
        empty = (sizes[:, 0] == 0) | (sizes[:, 1] == 0)
        res.n_empty_frames = int(empty.sum())
        if not empty.any():
            return
        groups = [name for name, k in (("g1", 0), ("g2", 1)) if (sizes[empty, k] == 0).any()]
        texts = [f"{name} ({getattr(g, '_selection_strings', ('',))[0]!r})"
                 for name, g in (("g1", self.g1), ("g2", self.g2)) if name in groups]
        which = texts[0] if self.g1 is self.g2 else " or ".join(texts)
        frames = np.asarray(res.get("frame_index", np.arange(len(sizes))))[empty]
        shown = ", ".join(map(str, frames[:8])) + (", ..." if len(frames) > 8 else "")
        if empty.all():
            raise ValueError(
                f"{which} holds no atom in any of the {len(sizes)} frames analysed: there are "
                "no pairs to normalise (g(r) would be NaN); check the selection, or the "
                "frames (start, stop, step)")
        warnings.warn(
            f"{res.n_empty_frames} of {len(sizes)} frames hold no atom in {which} (frame "
            f"indices {shown}): they add no pairs, and count with size 0 in the mean group "
            "sizes of the normalisation (results.frame_group_sizes, "
            "results.n_empty_frames)", RuntimeWarning, stacklevel=4)

    def _normalise(self, res):
        if res is self.results and getattr(self, "_updating", False):
            self._check_empty_frames(res)
        res.count = res.count_uint64.astype(np.float64)
        res.n_pairs = self._n_pairs()
        res.rdf = self._normalised(res.count, res.n_pairs)
        res.cdf = np.cumsum(res.count) / self.n_frames
        res.coordination = res.cdf / self._group_sizes()[0]
        self._set_densities(res)

    def _density_sizes(self):
        return list(self._group_sizes())

    def get_cdf(self):
        r"""The cumulative count per frame, :math:`\sum_{k' \le k} n_{k'} /
        N_\mathrm{frames}` (``results.cdf``, set by :meth:`run`; as
        :meth:`mdakit_fastrdf.InterRDF_s.get_cdf`). Divided by ``len(g1)`` it is the running
        coordination number ``results.coordination``.

        Returns
        -------
        numpy.ndarray
        """
        if "cdf" not in self.results:
            raise RuntimeError("call run() before get_cdf()")
        return self.results.cdf

    def first_shell(self, **options) -> FirstShell:
        """The first peak and minimum of g(r) and the coordination number of the first
        shell of this run: :func:`first_shell` of ``results.bins``, ``results.rdf``,
        ``results.coordination`` and ``results.count`` (halved for a group with itself,
        which counts each pair twice), so that the noise of few frames does not fool it
        (`options`: its keyword arguments). Needs ``norm='rdf'``.
        """
        if "rdf" not in self.results:
            raise RuntimeError("call run() before first_shell()")
        if self.norm != "rdf":
            raise ValueError(f"first_shell() looks for the minimum of g(r): it needs "
                             f"norm='rdf', this run has norm={self.norm!r}")
        res = self.results
        if "count" not in options:
            # a group with itself counts each pair twice (i-j and j-i): half are independent
            twice = len(self.g1) == len(self.g2) and np.array_equal(self.g1.ix, self.g2.ix)
            options["count"] = np.asarray(res.count, dtype=np.float64) / (2 if twice else 1)
        return first_shell(res.bins, res.rdf, res.coordination, **options)

    def _output_parameters(self):
        block = self._exclusion_block
        return {
            "exclusion_block": None if block is None else [int(v) for v in block],
            "exclude_same": {v: k for k, v in EXCLUDE_SAME.items()}.get(self.exclude_same),
            "n_atoms1": len(self.g1),
            "n_atoms2": len(self.g2),
            "normalization_mode": self.normalization_mode,
        } | ({} if not self._has_compounds() else {
            "compound": list(self.compound), "center": self.center, "unwrap": self.unwrap,
            "n_centres1": self._n_rows[0], "n_centres2": self._n_rows[1]})

    @classmethod
    def _curves(cls, results, parameters, *, label=None):
        """One line: g(r), and the running number of g2 atoms around a g1 atom."""
        n_frames = parameters["n_frames"]
        n_a = parameters.get("n_centres1", parameters["n_atoms1"])
        cn = running_coordination(np.asarray(results.count, dtype=np.float64), n_frames, n_a)
        cn_sem = None
        if "block_count_uint64" in results:
            from .blocks import block_sem

            per_block = running_coordination(
                results.block_count_uint64.astype(np.float64), results.block_n_frames[:, None],
                n_a)
            cn_sem = block_sem(per_block)
        return [Curve(label, results.rdf, results.get("rdf_sem"), cn, cn_sem)]

    #: what the running coordination number counts (the plot's second axis)
    _coordination_label = "second group's atoms around an atom of the first"

    # -- deprecated attributes, as in MDAnalysis --------------------------------------
    @property
    def edges(self):
        return deprecated_result(self.results, "edges", "edges")

    @property
    def count(self):
        return deprecated_result(self.results, "count", "count")

    @property
    def bins(self):
        return deprecated_result(self.results, "bins", "bins")

    @property
    def rdf(self):
        return deprecated_result(self.results, "rdf", "rdf")
