r"""All partial radial distribution functions of a system in one pass.

:class:`SpeciesRDF` splits an AtomGroup into chemical species (by element, type, name,
residue name, a mapping, a function or explicit AtomGroups) and histograms every intra- and
inter-species pair distance of a frame in one kernel call, as CADISHI does for its species
use case (../shared/papers: CADISHI §4.4).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence

import numpy as np
from MDAnalysis.analysis.results import Results, ResultsGroup

from .base import (
    RDFBase,
    check_atomgroup,
    check_nbins,
    check_norm,
    check_range,
    histogram_edges,
    shell_volumes,
)
from ..engine import NO_BOX, wrap_positions

__all__ = ["SpeciesRDF"]

_BY_ATTR = {"element": "elements", "type": "types", "name": "names", "resname": "resnames"}
_EXCLUDE_SAME = {"residue": "resindices", "segment": "segindices", "chain": "chainIDs"}


def _group_species(atomgroup, by):
    """``[(label, AtomGroup), ...]`` of the species (unsorted)."""
    from MDAnalysis.core.groups import AtomGroup

    if isinstance(by, str):
        key = by.lower()
        if key not in _BY_ATTR:
            raise ValueError(
                f"by must be 'element', 'type', 'name', 'resname', a mapping, a callable or "
                f"a list of AtomGroups; got {by!r}"
            )
        attr = _BY_ATTR[key]
        try:
            values = np.asarray(getattr(atomgroup, attr))
        except Exception:  # MDAnalysis raises NoDataError (an AttributeError/ValueError)
            hint = ""
            if key == "element":
                hint = (" Group by='type' or by='name' instead, or guess the elements first: "
                        "u.guess_TopologyAttrs(to_guess=['elements']).")
            raise ValueError(
                f"by={by!r}: the topology of this Universe has no {attr!r} attribute.{hint}"
            ) from None
        labels = values
    elif isinstance(by, Mapping):
        out = []
        for label, sel in by.items():
            if isinstance(sel, str):
                ag = atomgroup.select_atoms(sel)
            elif isinstance(sel, AtomGroup):
                ag = sel
            else:
                raise TypeError(
                    f"by: the value for species {label!r} must be an AtomGroup or a selection "
                    f"string, got {type(sel).__name__}"
                )
            out.append((label, ag))
        return out
    elif callable(by):
        labels = np.asarray(by(atomgroup))
        if labels.shape != (len(atomgroup),):
            raise ValueError(
                f"by: the callable must return one label per atom ({len(atomgroup)}), got an "
                f"array of shape {labels.shape}"
            )
    elif isinstance(by, Sequence) and all(isinstance(g, AtomGroup) for g in by) and len(by):
        return [(k, g) for k, g in enumerate(by)]
    else:
        raise TypeError(
            f"by must be 'element', 'type', 'name', 'resname', a mapping, a callable or a "
            f"list of AtomGroups; got {type(by).__name__}"
        )
    uniq, inverse = np.unique(labels, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [(u.item() if hasattr(u, "item") else u, atomgroup[inverse == k])
            for k, u in enumerate(uniq)]


class SpeciesRDF(RDFBase):
    r"""Every partial radial distribution function of a system, in one pass per frame.

    The atoms of `atomgroup` are split into species (by element, type, name, residue name,
    a mapping, a function or a list of AtomGroups). Each frame, one kernel call histograms the
    minimum-image distances of every species pair :math:`(a, b)`, :math:`a \le b`, on the CPU
    or a GPU (CADISHI's species decomposition): :math:`S` species give :math:`S(S+1)/2`
    partial histograms for the cost of one pass over the atom pairs. Species are sorted by
    size, largest first, so that the kernel's tiles are balanced.

    Each partial equals what :class:`InterRDF` (and MDAnalysis's) gives for the two species'
    AtomGroups with the same parameters (see Notes for the distance arithmetic).

    Parameters
    ----------
    atomgroup : AtomGroup
        The atoms to analyse.
    by : str, mapping, callable or list of AtomGroup, optional
        How to form species: ``'element'`` (default), ``'type'``, ``'name'`` or
        ``'resname'`` (one species per distinct value of that attribute); a mapping
        ``{label: AtomGroup or selection string}`` (a selection string is applied to
        `atomgroup`); a callable taking `atomgroup` and returning one label per atom; or a
        list of AtomGroups (labelled 0, 1, ...). Species may overlap only when given as a
        mapping or list.
    nbins : int, optional
        Number of bins. At most 4,000,000 (the kernels' limit; more is a
        ValueError). Histograms that do not fit in the available memory are a
        MemoryError with the size, raised before they are allocated.
    range : tuple of float, optional
        ``(rmin, rmax)`` in Å; bins follow :func:`numpy.histogram` (the last bin is closed).
    norm : {'rdf', 'density', 'none'}, optional
        Normalisation of each partial, as :class:`InterRDF` (see Notes).
    exclude_same : {'residue', 'segment', 'chain'}, optional
        Leave out pairs of atoms in the same residue, segment or chain (and so each atom with
        itself), in every partial. As in MDAnalysis, :math:`N_\mathrm{pairs}` is not changed.
    exclude_self : bool, optional
        Leave out each atom paired with itself (the zero distances of the intra-species
        partials): partial :math:`(a, a)` then equals ``InterRDF(g_a, g_a,
        exclusion_block=(1, 1))``, with :math:`N_\mathrm{pairs} = N_a^2 - N_a`. Default
        ``False``: ``InterRDF(g_a, g_a)``, whose first bin holds the :math:`N_a` self pairs
        when ``rmin`` is 0. (InterRDF's ``exclusion_block`` has no per-species meaning and is
        not offered.)
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}, optional
        Keyword only. Where the kernel runs (see :class:`InterRDF`).
    precision : {'single', 'double'}, optional
        Keyword only. ``'double'`` gives InterRDF's exact counts; ``'single'`` (default) may
        move a pair within float32 rounding of a bin edge to the neighbouring bin.
    n_threads : int, optional
        Keyword only. CPU threads per process.
    method : {'auto', 'allpairs', 'cells'}, optional
        Keyword only. How the pairs within ``rmax`` are found (see :class:`InterRDF`): every
        pair, or cell lists (O(N) when ``rmax`` is well below the box); the same counts.
        ``'auto'`` (default) takes the cheaper per frame.
    verbose : bool, optional
        Show detailed progress of the calculation if set to ``True``.

    Attributes
    ----------
    results.species : list
        Species labels, largest species first (the order of every per-species array).
    results.n_atoms : numpy.ndarray
        Atoms per species.
    results.pairs : numpy.ndarray
        ``(n_pairs, 2)`` species indices :math:`(a, b)`, :math:`a \le b`.
    results.pair_labels : list of tuple
        The labels of each pair.
    results.edges, results.bins : numpy.ndarray
        Bin edges and centres in Å.
    results.count : numpy.ndarray
        ``(n_pairs, nbins)`` float64 pair counts summed over frames.
    results.count_uint64 : numpy.ndarray
        The same counts as exact integers.
    results.rdf : numpy.ndarray
        ``(n_pairs, nbins)`` normalised partials.
    results.n_pairs : numpy.ndarray
        :math:`N_\mathrm{pairs}` of each partial (used by ``norm='rdf'``).
    results.cdf : numpy.ndarray
        ``(n_pairs, nbins)`` cumulative count per frame, :math:`\sum_{k'\le k} n_{ab,k'} /
        N_\mathrm{frames}`.
    results.coordination : numpy.ndarray
        ``(n_pairs, nbins)`` running coordination number of species :math:`b` around an atom
        of species :math:`a`: ``cdf / N_a`` (use :meth:`partial` for :math:`a` around
        :math:`b`).
    results.total_count, results.total_rdf : numpy.ndarray
        The all-atom histogram and RDF rebuilt from the partials (only when the species do
        not overlap), equal to ``InterRDF(atomgroup, atomgroup)`` (see Notes).
    results.volume_cum : float
        Sum of the box volumes (only with ``norm='rdf'``).

    Notes
    -----
    Partial :math:`(a, b)` counts every atom pair :math:`(i, j)`, :math:`i \in a`,
    :math:`j \in b`, once; for :math:`a = b` every ordered pair is counted (both
    :math:`(i, j)` and :math:`(j, i)`) plus each atom with itself at distance 0, exactly as
    ``InterRDF(g, g)``. With :math:`n_{ab,k}` the count of bin :math:`k`,
    :math:`V_k = \frac{4}{3}\pi(r_{k+1}^3 - r_k^3)` and :math:`\langle V\rangle` the mean box
    volume:

    .. math::

        g_{ab}(r_k) = \frac{n_{ab,k}\,\langle V\rangle}{N_\mathrm{frames}\, V_k\,
        N^{ab}_\mathrm{pairs}} \;(\text{rdf}),\qquad
        \frac{n_{ab,k}}{N_\mathrm{frames} V_k}\;(\text{density}),\qquad
        \frac{n_{ab,k}}{N_\mathrm{frames}}\;(\text{none})

    with :math:`N^{ab}_\mathrm{pairs} = N_a N_b` (:math:`N_a^2` for :math:`a = b`, less
    :math:`|a \cap b|` with ``exclude_self``).

    The total (all-atom) histogram of disjoint species counts every ordered pair:
    :math:`n_k = \sum_a n_{aa,k} + 2\sum_{a<b} n_{ab,k}`, normalised like one partial with
    :math:`N_\mathrm{pairs} = \sum_a N^{aa}_\mathrm{pairs} + 2\sum_{a<b}
    N^{ab}_\mathrm{pairs}` (:math:`N^2`, or :math:`N^2 - N` with ``exclude_self``). With
    ``norm='rdf'`` it is the weighted sum of the partials

    .. math::

        g(r) = \sum_a w_{aa}\, g_{aa}(r) + \sum_{a<b} 2 w_{ab}\, g_{ab}(r), \qquad
        w_{ab} = N^{ab}_\mathrm{pairs} / N_\mathrm{pairs}

    i.e. :math:`g = \sum_{a,b} x_a x_b g_{ab}` with the fractions :math:`x_a = N_a / N`
    (without exclusions); with ``'density'`` or ``'none'`` the partials simply add up.

    *Distances.* With a periodic box all positions are wrapped into the primary cell (in
    float32, as MDAnalysis's grid search does) and the minimum image is exact; without a box
    the float32 positions are used as they are. MDAnalysis's InterRDF instead chooses, per
    pair of groups, a grid search or brute force (``capped_distance``), which handle float32
    positions slightly differently. In double precision a partial therefore equals
    MDAnalysis's InterRDF for the same two groups bit for bit whenever MDAnalysis handles the
    positions the same way: always for triclinic boxes; for orthorhombic boxes when it takes
    its grid search (both groups of at least 10 atoms and ``rmax`` at most 0.3 box lengths,
    or at least :math:`10^8` pairs); without a box when it takes brute force (a group of
    fewer than 10 atoms, or ``rmax`` above 0.3 of the pair's extent). Otherwise distances can
    differ by a float32 rounding of a position (relative :math:`\lesssim 10^{-7}`), which
    moves a pair to the neighbouring bin only when its distance lies that close to a bin
    edge; the total of each partial is unchanged.

    Examples
    --------
    >>> import MDAnalysis as mda
    >>> from MDAnalysisTests.datafiles import TPR, XTC
    >>> from mdakit_fastrdf import SpeciesRDF
    >>> u = mda.Universe(TPR, XTC)
    >>> srdf = SpeciesRDF(u.atoms, by="element", nbins=75, range=(0.0, 15.0)).run(stop=2)
    >>> len(srdf.results.species), srdf.results.rdf.shape
    (7, (28, 75))
    >>> oh = srdf.partial("O", "H")
    >>> oh.rdf.shape, oh.coordination.shape
    ((75,), (75,))

    Exclude pairs within a residue (e.g. the intramolecular O-H bonds of water)::

        srdf = SpeciesRDF(u.atoms, exclude_same="residue").run()
    """

    _block_outputs = ("rdf", "cdf", "coordination", "total_rdf")

    def __init__(
        self,
        atomgroup,
        by="element",
        nbins=75,
        range=(0.0, 15.0),
        norm="rdf",
        exclude_same=None,
        exclude_self=False,
        *,
        device="auto",
        precision="single",
        n_threads=None,
        method="auto",
        **kwargs,
    ):
        check_atomgroup(atomgroup, "atomgroup")
        super().__init__(atomgroup.universe.trajectory, **kwargs)
        self.atomgroup = atomgroup
        self.norm = check_norm(norm)
        self.rdf_settings = {"bins": check_nbins(nbins), "range": check_range(range)}
        if exclude_same is not None and exclude_same not in _EXCLUDE_SAME:
            raise ValueError(
                f"exclude_same must be None, 'residue', 'segment' or 'chain', got {exclude_same!r}"
            )
        self.exclude_same = exclude_same
        if not isinstance(exclude_self, (bool, np.bool_)):
            raise TypeError(f"exclude_self must be True or False, got {exclude_self!r}")
        self.exclude_self = bool(exclude_self)
        self._init_compute(device, precision, n_threads, method)

        species = _group_species(atomgroup, by)
        from MDAnalysis.core.groups import UpdatingAtomGroup

        for label, ag in species:
            if ag.universe is not atomgroup.universe:
                raise ValueError(f"by: species {label!r} belongs to another Universe")
            if isinstance(ag, UpdatingAtomGroup):
                raise ValueError(
                    f"by: species {label!r} is an UpdatingAtomGroup; its atoms would be frozen "
                    f"at construction. Pass a static AtomGroup (e.g. group.atoms)."
                )
            if len(ag) == 0:
                raise ValueError(f"by: species {label!r} has no atoms")
        labels = [label for label, _ in species]
        if len(set(map(repr, labels))) != len(labels):
            raise ValueError(f"by: species labels must be distinct, got {labels!r}")
        # Largest species first (CADISHI sorts species by size for balanced tiles).
        species.sort(key=lambda s: (-len(s[1]), str(s[0])))
        self.species = [label for label, _ in species]
        self.groups = [ag for _, ag in species]
        n = len(species)
        self._pairs = np.array([(a, b) for a in builtins.range(n) for b in builtins.range(a, n)],
                               dtype=np.int32).reshape(-1, 2)
        self._index = {}
        for k, (a, b) in enumerate(self._pairs):
            self._index[(a, b)] = k
            self._index[(b, a)] = k
        sizes = np.array([len(g) for g in self.groups], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._ix = np.concatenate([g.ix for g in self.groups])
        self._disjoint = len(np.unique(self._ix)) == len(self._ix)

    # -- per-worker setup ---------------------------------------------------------------
    def _prepare(self):
        nbins = self.rdf_settings["bins"]
        self._check_histogram_memory(len(self._pairs), nbins, result_arrays=4)
        edges, bins = histogram_edges(nbins, self.rdf_settings["range"])
        self.results.edges = edges
        self.results.bins = bins
        self.results.count_uint64 = np.zeros((len(self._pairs), nbins), dtype=np.uint64)
        if self.norm == "rdf":
            self.results.volume_cum = 0
        self._edges = np.ascontiguousarray(edges, dtype=np.float64)
        self._buf = np.empty((len(self._ix), 3), dtype=np.float32)
        self._labels = self._make_labels()
        self._engine = self._make_engine()

    def _make_labels(self):
        if self.exclude_same is not None:
            values = getattr(self.atomgroup.universe.atoms[self._ix],
                             _EXCLUDE_SAME[self.exclude_same])
        elif self.exclude_self:
            values = self._ix
        else:
            return None
        _, codes = np.unique(values, return_inverse=True)
        return np.ascontiguousarray(codes.reshape(-1), dtype=np.int32)

    def _single_frame(self):
        box = self._frame_box()
        self._take_positions(self._ix, self._buf)
        if box.kind != NO_BOX:
            wrap_positions(self._buf, box)
        self._engine.accumulate(self._buf, self._offsets, self._pairs, self._edges, box,
                                self._labels, self._frame_out(self.results.count_uint64))
        if self.norm == "rdf":
            self.results.volume_cum += self._ts.volume

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

    def _pair_counts(self):
        """:math:`N_\\mathrm{pairs}` of every partial."""
        sizes = np.diff(self._offsets)
        a, b = self._pairs[:, 0], self._pairs[:, 1]
        n = sizes[a] * sizes[b]
        if self.exclude_self:
            sets = [set(g.ix.tolist()) for g in self.groups]
            n = n - np.array([len(sets[i] & sets[j]) for i, j in self._pairs], dtype=np.int64)
        return n.astype(np.int64)

    def _normalise(self, count, n_pairs):
        norm = self.n_frames
        if self.norm in ("rdf", "density"):
            norm = norm * shell_volumes(self.results.edges)
        if self.norm == "rdf":
            box_vol = self.results.volume_cum / self.n_frames
            norm = norm * (np.asarray(n_pairs, dtype=np.float64)[..., None] / box_vol)
        return count / norm

    def _conclude(self):
        res = self.results
        res.species = list(self.species)
        res.n_atoms = np.diff(self._offsets)
        res.pairs = self._pairs.copy()
        res.pair_labels = [(self.species[a], self.species[b]) for a, b in self._pairs]
        res.count = res.count_uint64.astype(np.float64)
        res.n_pairs = self._pair_counts()
        if self.norm == "rdf":
            self.volume_cum = res.volume_cum
        res.rdf = self._normalise(res.count, res.n_pairs)
        res.cdf = np.cumsum(res.count, axis=1) / self.n_frames
        res.coordination = res.cdf / res.n_atoms[self._pairs[:, 0]][:, None]
        if self._disjoint:
            mult = np.where(self._pairs[:, 0] == self._pairs[:, 1], 1, 2).astype(np.uint64)
            total = (res.count_uint64 * mult[:, None]).sum(axis=0, dtype=np.uint64)
            res.total_count_uint64 = total
            res.total_count = total.astype(np.float64)
            res.total_n_pairs = int((res.n_pairs * mult.astype(np.int64)).sum())
            res.total_rdf = self._normalise(res.total_count, res.total_n_pairs)

    def partial(self, a, b):
        """The partial of species `a` with species `b` (in either order).

        Returns
        -------
        Results
            ``count``, ``count_uint64``, ``rdf``, ``cdf`` (arrays of ``nbins``),
            ``coordination`` (running number of `b` atoms around an `a` atom, ``cdf / N_a``),
            ``n_pairs`` and ``index`` (row in the ``results`` arrays).
        """
        if "rdf" not in self.results:
            raise RuntimeError("call run() before partial()")
        ia, ib = self._species_index(a), self._species_index(b)
        k = self._index[(ia, ib)]
        res = self.results
        return Results(
            index=k,
            species=(self.species[ia], self.species[ib]),
            count=res.count[k],
            count_uint64=res.count_uint64[k],
            rdf=res.rdf[k],
            cdf=res.cdf[k],
            coordination=res.cdf[k] / res.n_atoms[ia],
            n_pairs=int(res.n_pairs[k]),
        )

    def _species_index(self, label):
        for k, s in enumerate(self.species):
            if s == label or (isinstance(s, str) and isinstance(label, str) and
                              s.lower() == label.lower() and
                              sum(x.lower() == label.lower() for x in self.species
                                  if isinstance(x, str)) == 1):
                return k
        raise KeyError(f"no species {label!r}; the species are {self.species!r}")

