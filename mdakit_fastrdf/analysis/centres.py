r"""Centres of the compounds of a group, made whole through the periodic box, per frame.

:class:`CompoundCentres` computes what MDAnalysis's
``group.center(weights, compound=compound, unwrap=unwrap)`` computes, vectorised over the
compounds. MDAnalysis's ``unwrap`` calls ``make_whole`` once per compound in Python (about
2 s a frame for the 11084 waters of the adk system); here the bond tree of every compound
is built once, and each frame makes all compounds whole with one minimum-image step per
level of the trees.

The arithmetic follows MDAnalysis 2.11 (``lib/_cutil.pyx:make_whole``,
``core/groups.py:GroupBase.center`` and ``_split_by_compound_indices``):

* the reference atom of a compound is its first atom in the order of the group (the
  stable split of ``unwrap``); it keeps its position;
* the atoms are placed in breadth-first waves along the bonds between atoms of the same
  compound; an atom of wave :math:`k` is placed from its bonded neighbour of wave
  :math:`k-1` that comes first in the group (``make_whole`` walks an ordered set), as

  .. math::

      \mathbf{r}'_c = \mathrm{f32}\bigl(\mathbf{r}'_p + \mathrm{mic}(\mathrm{f32}(\mathbf{r}_c
      - \mathbf{r}'_p))\bigr)

  in float64. In an orthorhombic box the minimum image is ``make_whole``'s own formula
  (:math:`s = \mathrm{f32}(1/L)\,x`, :math:`x - L\,\mathrm{round}(s)`, C's rounding of
  halves away from zero); in a triclinic box it is
  :func:`MDAnalysis.lib.distances.minimize_vectors`;
* in an orthorhombic box a compound whose atoms all lie within half a box length of its
  reference atom on every axis keeps its positions as they are (``make_whole``'s early
  exit);
* the centres are taken per class of compounds of equal size (the non-stable split of
  ``center``), with MDAnalysis's ``einsum`` (weights) or ``mean`` (geometry) in float64,
  compounds in the order of their index (residue, segment, molecule or fragment index).

With MDAnalysis 2.11 the centres are the same bits as ``center(..., unwrap=True)`` on every
case of tests/analysis/test_centres.py. The triclinic minimum image differs from ``make_whole``'s
(27 images around the neighbour, no first shift) in the order of the float64 additions,
and where bonded atoms lie more than one image apart: ``make_whole`` then leaves the bond
broken, ``minimize_vectors`` finds the minimum image.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CENTERS", "COMPOUNDS", "CompoundCentres", "check_compound", "check_connected",
           "compound_centres", "compound_indices", "compound_rows", "needs_attribute"]

#: ``compound`` values of :class:`~mdakit_fastrdf.InterRDF` (those of MDAnalysis's
#: ``AtomGroup.center``).
COMPOUNDS = ("group", "residues", "segments", "molecules", "fragments")
#: ``center`` values of :class:`~mdakit_fastrdf.InterRDF`.
CENTERS = ("geometry", "mass")


def check_compound(compound):
    """``(compound1, compound2)`` from InterRDF's `compound`: None, one name for both
    groups, or a pair (None meaning atoms on that side)."""
    pair = (compound, compound) if compound is None or isinstance(compound, str) else compound
    try:
        c1, c2 = pair
    except (TypeError, ValueError):
        raise ValueError(
            f"compound must be None, one of {COMPOUNDS} or a pair of them (None for atoms on "
            f"that side), got {compound!r}") from None
    for c in (c1, c2):
        if c is not None and (not isinstance(c, str) or c not in COMPOUNDS):
            raise ValueError(
                f"compound: unknown compound {c!r}; use one of {COMPOUNDS} (MDAnalysis's "
                f"AtomGroup.center compounds), a pair of them, or None for atoms")
    return c1, c2


def needs_attribute(group, name, attr, fix):
    """ValueError naming `fix` when `group`'s topology lacks `attr`. Asked of the
    topology where it can be (``group.bonds`` builds a Bond object per bond: 0.25 s for
    the adk water)."""
    topology = getattr(group.universe, "_topology", None)
    if topology is not None:
        present = hasattr(topology, attr)
    else:
        try:
            getattr(group, attr)
            present = True
        except AttributeError:  # MDAnalysis's NoDataError is an AttributeError
            present = False
    if not present:
        raise ValueError(f"{name}: the topology has no {attr}, which {fix}") from None


def compound_rows(groups, compound, center, unwrap, exclude_same=None):
    """InterRDF's `compound`, `center` and `unwrap` checked for `groups` (g1, g2):
    ``(compound pair, rows of each group, each group's CompoundCentres or None)``, the
    rows being atoms, or the centres of the group's compounds."""
    pair = check_compound(compound)
    if not isinstance(center, str) or center not in CENTERS:
        raise ValueError(f"center must be one of {CENTERS}, got {center!r}")
    if not isinstance(unwrap, (bool, np.bool_)):
        raise TypeError(f"unwrap must be True or False, got {unwrap!r}")
    rows, centres = [len(g) for g in groups], [None, None]
    if pair == (None, None):
        return pair, rows, centres
    if exclude_same is not None:
        raise ValueError(
            f"exclude_same={exclude_same!r} cannot be combined with compound="
            f"{compound!r}: a compound's centre is no atom of a residue, segment or "
            "chain. Leave pairs of a centre with itself out with exclusion_block=(1, 1)")
    for k, (g, c, name) in enumerate(zip(groups, pair, ("g1", "g2"))):
        if c is None:
            continue
        if c == "molecules":
            needs_attribute(g, name, "molnums", "compound='molecules' needs (read e.g. "
                            "from a TPR file); use compound='fragments' or 'residues'")
        if c == "fragments" or unwrap:
            needs_attribute(
                g, name, "bonds",
                f"compound={c!r} with unwrap={bool(unwrap)} needs to make the compounds "
                "whole along their bonds; add them (u.guess_TopologyAttrs(to_guess="
                "['bonds'])) or, if the molecules are whole in the trajectory, pass "
                "unwrap=False" + (" (compound='fragments' always needs bonds)"
                                  if c == "fragments" else ""))
        if center == "mass":
            needs_attribute(g, name, "masses", "center='mass' needs")
        # the number of centres, and the error of a compound that unwrap cannot make
        # whole now rather than in the first frame (the plan is built once, dropped
        # when pickled: a parallel worker builds its own)
        centres[k] = CompoundCentres(g, c, center, bool(unwrap), name)
        rows[k] = centres[k].prepare()
    return pair, rows, centres

NOT_CONNECTED = (
    "{name}: compound={compound!r} with unwrap=True makes each compound whole along its "
    "bonds (MDAnalysis's unwrap), but a compound of this group is not connected by bonds (a "
    "segment or group of several molecules, a water residue with an unbonded virtual site "
    "such as MW, or missing bonds). Choose a compound of connected atoms (e.g. 'molecules' "
    "or 'fragments'), select bonded atoms (e.g. 'resname SOL and not name MW'), add the "
    "bonds (u.guess_TopologyAttrs(to_guess=['bonds'])), or pass unwrap=False if the "
    "compounds are whole in the trajectory")

_INDEX_ATTRIBUTE = {"residues": "resindices", "segments": "segindices",
                    "molecules": "molnums", "fragments": "fragindices"}


def compound_indices(group, compound):
    """The compound index of every atom of `group` (MDAnalysis's
    ``_get_compound_indices``; all zero for ``'group'``)."""
    if compound == "group":
        return np.zeros(len(group), dtype=np.int64)
    return np.asarray(getattr(group, _INDEX_ATTRIBUTE[compound]), dtype=np.int64)


def split_by_size(indices):
    """MDAnalysis's ``_split_by_compound_indices`` (non-stable, as ``center`` calls it):
    ``[(compound_mask, atom_mask)]`` per compound size, ``atom_mask`` the atoms of each
    compound of that size as rows, and the number of compounds."""
    sizes = np.bincount(indices)
    size_per_atom = sizes[indices]
    sizes = sizes[sizes != 0]
    needs_sorting = np.any(np.diff(indices) < 0)
    if needs_sorting:
        sort = np.argsort(indices)  # MDAnalysis's quicksort: the same atom order
        size_per_atom = size_per_atom[sort]
    parts = []
    for size in np.unique(sizes):
        rows = size_per_atom == size
        atoms = sort[rows] if needs_sorting else np.where(rows)[0]
        parts.append((sizes == size, atoms.reshape(-1, size)))
    return parts, len(sizes)


def universe_bonds(u):
    """The bonds of Universe `u` as atom index pairs: the topology's raw bond list (20x
    faster than ``u.bonds.indices``, which builds a Bond object per bond: 0.3 s for the
    25533 bonds of adk), ``u.bonds.indices`` where the topology does not expose it."""
    topology = getattr(u, "_topology", None)
    if topology is not None and hasattr(topology, "bonds"):
        return topology.bonds.values
    return u.bonds.indices if hasattr(u, "bonds") and len(u.bonds) else np.empty((0, 2))


def bond_levels(group, labels):
    """The bond trees of the compounds (atoms with equal `labels`) of `group`, flattened
    by depth: ``[(child, parent), ...]`` (rows of `group`) for depths 1, 2, ...; the root
    of each tree is the compound's first atom in the group. A child's parent is its bonded
    neighbour of the previous depth that comes first in the group (``make_whole``'s order).
    None when a compound is not connected by bonds between its own atoms."""
    from scipy.sparse import csr_matrix

    n = len(group)
    u = group.universe
    bonds = np.asarray(universe_bonds(u), dtype=np.int64).reshape(-1, 2)
    row = np.full(u.atoms.n_atoms, -1, dtype=np.int64)
    row[group.ix] = np.arange(n)
    b = row[bonds].reshape(-1, 2)
    b = b[(b >= 0).all(axis=1)]
    b = b[labels[b[:, 0]] == labels[b[:, 1]]]  # bonds inside one compound
    both = np.concatenate([b, b[:, ::-1]])
    adj = csr_matrix((np.ones(len(both), dtype=np.int8), (both[:, 0], both[:, 1])),
                     shape=(n, n))
    adj.sum_duplicates()
    placed = np.zeros(n, dtype=bool)
    _, first = np.unique(labels, return_index=True)
    placed[first] = True
    frontier = first
    levels = []
    while True:
        # every bond from the last wave to an atom not yet placed
        starts, ends = adj.indptr[frontier], adj.indptr[frontier + 1]
        counts = ends - starts
        src = np.repeat(frontier, counts)
        offs = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        dst = adj.indices[np.repeat(starts, counts) + offs]
        keep = ~placed[dst]
        src, dst = src[keep], dst[keep]
        if not len(dst):
            break
        # for each new atom, the neighbour of the last wave first in the group
        order = np.lexsort((src, dst))
        dst, src = dst[order], src[order]
        new = np.r_[True, dst[1:] != dst[:-1]]
        child, parent = dst[new], src[new]
        levels.append((child, parent))
        placed[child] = True
        frontier = child
    return levels if placed.all() else None


def check_connected(group, compound, name="g1"):
    """ValueError (:data:`NOT_CONNECTED`) unless the bonds between the atoms of each
    compound of `group` connect them (what MDAnalysis's unwrap needs); the topology alone
    decides, so it is checked once."""
    if bond_levels(group, compound_indices(group, compound)) is None:
        raise ValueError(NOT_CONNECTED.format(name=name, compound=compound))


class CompoundCentres:
    """The centres of the compounds of `group` in the current frame, float64 ``(n, 3)``:
    MDAnalysis's ``group.center(weights, compound=compound, unwrap=unwrap)`` (see the
    module), with its errors made explicit. Calling the object computes them.

    The plan (bond levels, size classes, masses) is built at the first call and dropped
    when the object is pickled: a parallel worker builds its own.

    A group holding an atom more than once is left to MDAnalysis's ``center`` (whose
    unwrap works on the unique atoms), as before.
    """

    def __init__(self, group, compound, center, unwrap, name="g1"):
        self.group = group
        self.compound = compound
        self.center = center
        self.unwrap = bool(unwrap)
        self.name = name
        self._plan = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_plan"] = None
        return state

    def prepare(self):
        """Build the plan now (a compound not connected by bonds raises here rather than
        in the first frame); the number of centres."""
        g = self.group
        if not g.isunique:  # left to MDAnalysis; its unwrap works on the unique atoms
            if self.unwrap:
                check_connected(g.unique, self.compound, self.name)
            return len(CompoundCentres(g, self.compound, self.center, False)._mdanalysis())
        if self._plan is None:
            self._plan = self._build()
        return 1 if self.compound == "group" else self._plan["n"]

    def _build(self):
        g = self.group
        labels = compound_indices(g, self.compound)
        plan = {"masses": (np.asarray(g.masses, dtype=np.float64)
                           if self.center == "mass" else None)}
        if self.compound != "group":
            plan["parts"], plan["n"] = split_by_size(labels)
        if self.unwrap:
            levels = bond_levels(g, labels)
            if levels is None:
                raise ValueError(NOT_CONNECTED.format(name=self.name, compound=self.compound))
            plan["levels"] = levels
            _, first, dense = np.unique(labels, return_index=True, return_inverse=True)
            plan["reference"] = first[dense.reshape(-1)]  # each atom's reference atom
            plan["dense"] = dense.reshape(-1)
        return plan

    def whole_positions(self):
        """The positions of the group with every compound made whole (float32), as
        MDAnalysis's ``group.unwrap(compound, reference=None, inplace=False)``."""
        plan = self._plan
        pos = self.group.positions
        if len(pos) < 2 or not plan["levels"]:
            return pos
        from MDAnalysis.lib.distances import minimize_vectors

        box = self.group.dimensions
        ortho = bool(np.all(box[3:] == 90.0))
        if ortho:  # make_whole's minimum_image: float32 box and inverse, C's round
            length = box[:3].astype(np.float32)
            inverse = (1.0 / length.astype(np.float64)).astype(np.float32).astype(np.float64)
            length = length.astype(np.float64)
            active = length > np.finfo(np.float32).eps
        new = pos.copy()
        for child, parent in plan["levels"]:
            vec = (pos[child] - new[parent]).astype(np.float64)
            if ortho:
                s = inverse * vec
                shift = np.rint(s)
                tie = np.abs(s - np.trunc(s)) == 0.5  # C rounds halves away from zero
                shift[tie] = np.trunc(s[tie]) + np.sign(s[tie])
                vec = np.where(active, length * (s - shift), vec)
            else:
                vec = minimize_vectors(vec, box)
            new[child] = new[parent].astype(np.float64) + vec
        if ortho:
            # make_whole keeps a compound within half a box of its reference atom as it is
            far = np.abs(pos - pos[plan["reference"]]) >= 0.5 * box[:3]
            broken = np.bincount(plan["dense"], weights=far.any(axis=1)) > 0
            keep = ~broken[plan["dense"]]
            new[keep] = pos[keep]
        return new

    def __call__(self):
        g = self.group
        if self.unwrap and g.dimensions is None:
            raise ValueError(
                f"{self.name}: compound={self.compound!r} with unwrap=True makes each "
                "compound whole through the periodic box, but this frame has no box; pass "
                "unwrap=False (without a box nothing is split by a boundary) or set the box")
        if not g.isunique:
            return self._mdanalysis()
        self.prepare()
        plan = self._plan
        coords = self.whole_positions() if self.unwrap else g.positions
        weights = plan["masses"]
        if self.compound == "group":  # MDAnalysis's arithmetic for one compound
            if weights is None:
                c = coords.astype(np.float64).mean(axis=0)
            else:
                c = np.einsum("ij,ij->j", coords, weights[:, None]) / weights.sum()
            return np.atleast_2d(c)
        if weights is None:
            coords = coords.astype(np.float64)
        centres = np.empty((plan["n"], 3), dtype=np.float64)
        for compound_mask, atom_mask in plan["parts"]:
            c = coords[atom_mask]
            if weights is None:
                c = c.mean(axis=1)
            else:
                w = weights[atom_mask]
                c = np.einsum("ijk,ijk->ik", c, w[:, :, None])
                c /= w.sum(axis=1)[:, None]
            centres[compound_mask] = c
        return centres

    def _mdanalysis(self):
        """MDAnalysis's own ``center`` (groups with repeated atoms)."""
        g = self.group
        weights = g.masses if self.center == "mass" else None
        try:
            centres = g.center(weights, compound=self.compound, unwrap=self.unwrap)
        except ValueError as err:
            if self.unwrap and "contiguous" in str(err):
                raise ValueError(NOT_CONNECTED.format(name=self.name,
                                                      compound=self.compound)) from None
            raise
        return np.atleast_2d(np.asarray(centres, dtype=np.float64))


def compound_centres(group, compound, center, unwrap, name="g1"):
    """The centres of the compounds of `group` in the current frame, float64 ``(n, 3)``
    (one :class:`CompoundCentres` call; keep the object to compute them every frame)."""
    return CompoundCentres(group, compound, center, unwrap, name)()
