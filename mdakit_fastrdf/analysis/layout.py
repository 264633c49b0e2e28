"""What the kernels histogram in each frame (:class:`PairLayout`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PairLayout"]


@dataclass
class PairLayout:
    """What the kernels histogram in each frame.

    Attributes
    ----------
    ix : numpy.ndarray
        Atom indices (``Universe.atoms``) of every species, species after species: the rows
        of the frame's coordinate block.
    offsets : numpy.ndarray
        ``(S + 1,)`` int64: species ``s`` holds rows ``offsets[s]:offsets[s + 1]``.
    pairs : numpy.ndarray
        ``(P,)`` species pairs ``(a, b)`` (int32), one histogram each.
    labels : numpy.ndarray or None
        ``(N,)`` int32: pairs of atoms with equal labels are not counted.
    segments : tuple
        ``((start, stop, n1, n2), ...)``: row ranges prepared together, with the sizes of
        the two groups MDAnalysis would see (coordinate mode ``'mdanalysis'``); one segment
        (all rows) for the species analyses, one per pair of groups for site histograms.
    """

    ix: np.ndarray
    offsets: np.ndarray
    pairs: np.ndarray
    labels: np.ndarray | None = None
    segments: tuple = ()

    @classmethod
    def of_groups(cls, groups, pairs, labels=None, sizes=None):
        """The layout of the AtomGroups `groups` (species in this order) and species
        `pairs`; ``sizes``: the group sizes of the one segment (default: the first two
        groups', or the first twice)."""
        n = np.array([len(g) for g in groups], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
        ix = np.concatenate([g.ix for g in groups]) if len(groups) > 1 else groups[0].ix.copy()
        if sizes is None:
            sizes = (int(n[0]), int(n[1] if len(n) > 1 else n[0]))
        return cls(ix=ix, offsets=offsets,
                   pairs=np.asarray(pairs, dtype=np.int32).reshape(-1, 2),
                   labels=labels, segments=((0, len(ix), *sizes),))
