r"""All partial radial distribution functions of a system in one pass.

:class:`SpeciesRDF` splits an AtomGroup into chemical species (by element, type, name,
residue name, a mapping, a function or explicit AtomGroups) and histograms every intra- and
inter-species pair distance of a frame in one kernel call, as CADISHI does for its species
use case (CADISHI §4.4: K. Reuter and J. Köfinger, *Comput. Phys. Commun.* **236**, 274
(2019), doi:10.1016/j.cpc.2018.10.018).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence

import numpy as np
from MDAnalysis.analysis.results import Results

from .base import PairHistogramBase, PairLayout
from .blocks import block_sem
from .boxes import BOX_FIELDS, BoxStatistics
from .checks import (
    EXCLUDE_SAME,
    check_atomgroup,
    check_exclude_same,
    check_normalization_mode,
)
from .declarations import (BY_NORM, Curve, Field, OutputSpec, Table, histogram_fields,
                           shell_fields)
from .docstrings import render_docs

__all__ = ["SpeciesRDF", "group_species", "pair_index", "pair_labels", "pair_suffixes",
           "species_index"]

_BY_ATTR = {"element": "elements", "type": "types", "name": "names", "resname": "resnames"}


def group_species(atomgroup, by):
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


@render_docs
class SpeciesRDF(BoxStatistics, PairHistogramBase):
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
        Keyword only. ``'double'`` (default) gives InterRDF's exact counts; ``'single'``
        (opt-in) may move a pair within float32 rounding of a bin edge to the neighbouring
        bin (see :class:`InterRDF`).
    n_threads : int, optional
        Keyword only. CPU threads per process.
    method : {'auto', 'allpairs', 'cells'}, optional
        Keyword only. How the pairs within ``rmax`` are found (see :class:`InterRDF`): every
        pair, or cell lists (O(N) when ``rmax`` is well below the box); the same counts.
        ``'auto'`` (default) takes the cheaper per frame.
    normalization_mode : {'exact', 'finite_size'}, optional
        Keyword only. ``'finite_size'`` (freud's): each intra-species partial
        :math:`(a, a)` is normalised by the :math:`N_a(N_a - 1)` pairs of distinct atoms
        (g times :math:`N_a/(N_a - 1)`), and so is the total (:math:`N(N-1)`); the
        inter-species partials, of disjoint groups, are unchanged. Needs ``norm='rdf'``,
        disjoint species and ``exclude_self=False`` (which already normalises by
        :math:`N_a^2 - N_a`). A species of one atom then has a partial :math:`(a, a)` of
        NaN (no pair of distinct atoms).
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
    results.rho : numpy.ndarray
        ``(n_species,)`` frame-averaged number densities :math:`\rho_a = N_a / \langle V
        \rangle` (Å⁻³), every `norm` (absent when a frame has no box);
        ``results.box_volume_cum`` and ``results.min_box_widths`` as in :class:`InterRDF`.

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
    ${ADK_WATER}
    >>> from mdakit_fastrdf import SpeciesRDF
    >>> srdf = SpeciesRDF(u.atoms, by="element", nbins=75, range=(0.0, 15.0)).run(stop=2)
    >>> len(srdf.results.species), srdf.results.rdf.shape
    (7, (28, 75))
    >>> oh = srdf.partial("O", "H")
    >>> oh.rdf.shape, oh.coordination.shape
    ((75,), (75,))

    Exclude pairs within a residue (e.g. the intramolecular O-H bonds of water)::

        srdf = SpeciesRDF(u.atoms, exclude_same="residue").run()
    """

    coordinates = "wrapped"
    _result_arrays = 4
    outputs = OutputSpec(
        fields=histogram_fields() + shell_fields("b around a") + (
            Field("total_count", "pairs summed over frames", "all-atom histogram"),
            Field("total_count_uint64", "pairs summed over frames",
                  "all-atom histogram (exact)", integer=True),
            Field("total_rdf", BY_NORM, "all-atom {quantity}", blocks=True),
        ) + BOX_FIELDS,
        tables=(
            Table(fields=("rdf", "count_uint64", "cdf", "coordination"),
                  labels=lambda res: pair_labels(res)),
            Table(fields=("total_rdf", "total_count_uint64"),
                  columns={"total_count_uint64": "count", "total_rdf": "rdf"},
                  labels=lambda res: {"pair": (["total"], ""), "species_a": (["*"], ""),
                                      "species_b": (["*"], "")}),
        ),
    )
    _coordination_label = "second species around an atom of the first"


    def __init__(self, atomgroup, by="element", nbins=75, range=(0.0, 15.0), norm="rdf",
                 exclude_same=None, exclude_self=False, *, normalization_mode="exact",
                 **kwargs):
        check_atomgroup(atomgroup, "atomgroup")
        self._init_histograms(atomgroup.universe, nbins, range, norm, kwargs=kwargs)
        self.atomgroup = atomgroup
        self.exclude_same = check_exclude_same(exclude_same, "SpeciesRDF")
        if not isinstance(exclude_self, (bool, np.bool_)):
            raise TypeError(f"exclude_self must be True or False, got {exclude_self!r}")
        self.exclude_self = bool(exclude_self)

        species = group_species(atomgroup, by)
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
        sizes = np.array([len(g) for g in self.groups], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._ix = np.concatenate([g.ix for g in self.groups])
        self._disjoint = len(np.unique(self._ix)) == len(self._ix)
        self.normalization_mode = check_normalization_mode(normalization_mode, self.norm,
                                                           type(self).__name__)
        if self.normalization_mode == "finite_size":
            if not self._disjoint:
                raise ValueError(
                    "normalization_mode='finite_size' needs disjoint species (its N_a / "
                    "(N_a - 1) is the factor of a group with itself); these species share "
                    "atoms. Use normalization_mode='exact' or species that do not overlap.")
            if self.exclude_self:
                raise ValueError(
                    "normalization_mode='finite_size' cannot be combined with "
                    "exclude_self=True: N_pairs already leaves the self pairs out "
                    "(N_a^2 - N_a), so g(r) tends to 1; use normalization_mode='exact'")

    # -- the base class's hooks ---------------------------------------------------------
    def _layout(self):
        """Every species (largest first) and every pair of species ``a <= b``."""
        if self.exclude_same is not None:
            values = getattr(self.atomgroup.universe.atoms[self._ix],
                             EXCLUDE_SAME[self.exclude_same])
        elif self.exclude_self:
            values = self._ix
        else:
            values = None
        labels = None
        if values is not None:
            _, codes = np.unique(values, return_inverse=True)
            labels = np.ascontiguousarray(codes.reshape(-1), dtype=np.int32)
        return PairLayout.of_groups(self.groups, self._pairs, labels)

    def _pair_counts(self):
        """N_pairs of every partial (norm="rdf")."""
        sizes = np.diff(self._offsets)
        a, b = self._pairs[:, 0], self._pairs[:, 1]
        n = sizes[a] * sizes[b]
        if self.exclude_self:
            sets = [set(g.ix.tolist()) for g in self.groups]
            n = n - np.array([len(sets[i] & sets[j]) for i, j in self._pairs], dtype=np.int64)
        if getattr(self, "normalization_mode", "exact") == "finite_size":
            n = n - np.where(a == b, sizes[a], 0)  # N_a (N_a - 1) for a with itself
        return n.astype(np.int64)

    def _species_results(self, res):
        """The species, their sizes and pairs, and the float counts: what every species
        analysis reports beside its own results."""
        res.species = list(self.species)
        res.n_atoms = np.diff(self._offsets)
        res.pairs = self._pairs.copy()
        res.pair_labels = [(self.species[a], self.species[b]) for a, b in self._pairs]
        res.count = res.count_uint64.astype(np.float64)

    def _normalise(self, res):
        self._species_results(res)
        res.n_pairs = self._pair_counts()
        if np.all(res.n_pairs > 0):
            res.rdf = self._normalised(res.count, res.n_pairs)
        else:  # finite_size: a species of one atom has no pair of distinct atoms
            with np.errstate(divide="ignore", invalid="ignore"):
                res.rdf = self._normalised(res.count, res.n_pairs)
            res.rdf[res.n_pairs == 0] = np.nan
        res.cdf = np.cumsum(res.count, axis=1) / self.n_frames
        res.coordination = res.cdf / res.n_atoms[self._pairs[:, 0]][:, None]
        if self._disjoint:
            mult = np.where(self._pairs[:, 0] == self._pairs[:, 1], 1, 2).astype(np.uint64)
            total = (res.count_uint64 * mult[:, None]).sum(axis=0, dtype=np.uint64)
            res.total_count_uint64 = total
            res.total_count = total.astype(np.float64)
            res.total_n_pairs = int((res.n_pairs * mult.astype(np.int64)).sum())
            res.total_rdf = self._normalised(res.total_count, res.total_n_pairs)
        self._set_densities(res)

    def _density_sizes(self):
        return np.diff(self._offsets)

    def _output_parameters(self):
        from .parameters import jsonable

        return {"exclude_same": self.exclude_same, "exclude_self": self.exclude_self,
                "normalization_mode": self.normalization_mode,
                "species": jsonable(self.species), "n_atoms": [len(g) for g in self.groups]}

    @classmethod
    def _curves(cls, results, parameters, *, pairs=None, total=False):
        """One line per partial (`pairs`: the species pairs to draw, b around a), and the
        total RDF (`total`). Without `pairs`, an intra-species partial whose first bin holds
        the self pairs (rmin 0 and no exclusion) is drawn from its second bin on, so that the
        spike of the zero distances does not flatten every curve."""
        species = list(results.species)
        if pairs is None:
            chosen = [(int(a), int(b)) for a, b in results.pairs]
        else:
            chosen = [(species_index(species, a), species_index(species, b)) for a, b in pairs]
        self_pairs = (not parameters.get("exclude_self") and not parameters.get("exclude_same")
                      and float(parameters["range"][0]) == 0.0)
        curves = []
        for ia, ib in chosen:
            k = pair_index(results.pairs, ia, ib)
            y = np.array(results.rdf[k], dtype=np.float64)
            if pairs is None and ia == ib and self_pairs:
                y[0] = np.nan
            cn = np.asarray(results.cdf[k]) / results.n_atoms[ia]
            cn_sem = (block_sem(results.block_cdf[:, k] / results.n_atoms[ia])
                      if "block_cdf" in results else None)
            sem = results.rdf_sem[k] if "rdf_sem" in results else None
            curves.append(Curve(f"{species[ia]}–{species[ib]}", y, sem, cn, cn_sem))
        if total:
            if "total_rdf" not in results:
                raise ValueError("total=True: these results have no total RDF (the species "
                                 "overlap)")
            y = np.array(results.total_rdf, dtype=np.float64)
            if pairs is None and self_pairs:
                y[0] = np.nan
            curves.append(Curve("total", y, results.get("total_rdf_sem"), color="black"))
        return curves

    #: the result of a run that :meth:`partial` needs
    _partial_needs = "rdf"

    @classmethod
    def _partial(cls, results, a, b):
        """The partial of species `a` with species `b` of `results` (see :meth:`partial`):
        the pair's row, species and counts, and :meth:`_partial_fields`."""
        ia = species_index(results.species, a)
        ib = species_index(results.species, b)
        k = pair_index(results.pairs, ia, ib)
        return Results(index=k, species=(results.species[ia], results.species[ib]),
                       count=results.count[k], count_uint64=results.count_uint64[k],
                       **cls._partial_fields(results, k, ia))

    @staticmethod
    def _partial_fields(results, k, ia):
        """What a partial holds beyond its counts: row `k`, first species `ia`."""
        return {"rdf": results.rdf[k], "cdf": results.cdf[k],
                "coordination": results.cdf[k] / results.n_atoms[ia],
                "n_pairs": int(results.n_pairs[k])}

    def partial(self, a, b):
        """The partial of species `a` with species `b` (in either order).

        Returns
        -------
        Results
            ``count``, ``count_uint64``, ``rdf``, ``cdf`` (arrays of ``nbins``),
            ``coordination`` (running number of `b` atoms around an `a` atom, ``cdf / N_a``),
            ``n_pairs`` and ``index`` (row in the ``results`` arrays).
        """
        if self._partial_needs not in self.results:
            raise RuntimeError("call run() before partial()")
        return self._partial(self.results, a, b)



def species_index(species, label):
    """Index of species `label` (a string label matches case-insensitively when that is
    unambiguous)."""
    for k, s in enumerate(species):
        if s == label:
            return k
    lowered = [k for k, s in enumerate(species)
               if isinstance(s, str) and isinstance(label, str) and s.lower() == label.lower()]
    if len(lowered) == 1:
        return lowered[0]
    raise KeyError(f"no species {label!r}; the species are {species!r}")


def pair_index(pairs, a, b):
    """Row of the species pair (a, b) (in either order)."""
    pairs = np.asarray(pairs)
    hit = np.flatnonzero(((pairs[:, 0] == a) & (pairs[:, 1] == b))
                         | ((pairs[:, 0] == b) & (pairs[:, 1] == a)))
    return int(hit[0])


def pair_labels(res):
    """CSV label columns of the partials: pair index and the two species."""
    species = [str(s) for s in res.species]
    return {
        "pair": ([str(k) for k in builtins.range(len(res.pairs))],
                 "index of the species pair (row of results.rdf), or 'total'"),
        "species_a": ([species[i] for i, _ in res.pairs], "first species"),
        "species_b": ([species[j] for _, j in res.pairs], "second species"),
    }


def pair_suffixes(res):
    """CSV column suffixes of the species pairs in a wide table: ``O_H`` (``partials_O_H``)."""
    species = [str(s) for s in res.species]
    return [f"{species[i]}_{species[j]}" for i, j in res.pairs]
