"""Pairs an RDF leaves out: MDAnalysis's ``exclusion_block`` (pairs within the same block
of consecutive rows) and ``exclude_same`` (pairs of equal residue, segment or chain), as
per-row int32 labels the kernels compare (a pair of equal labels is not counted)."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["block_labels", "check_block_sizes", "check_exclusion_block", "exclusion_labels"]


def exclusion_labels(values_a, values_b, same):
    """Per-row int32 labels from the values of the two groups (equal values: pair
    excluded); one group's values when it is used with itself."""
    values = values_a if same else np.concatenate([values_a, values_b])
    _, codes = np.unique(values, return_inverse=True)
    return np.ascontiguousarray(codes.reshape(-1), dtype=np.int32)


def check_exclusion_block(block):
    """``exclusion_block``, a pair of positive integers, or a ValueError."""
    try:
        xa, xb = block
    except (TypeError, ValueError):
        raise ValueError(f"exclusion_block must be a pair of integers, got {block!r}") from None
    for v in (xa, xb):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"exclusion_block must hold two positive integers, got {block!r}")
    return int(xa), int(xb)


def check_block_sizes(block, na, nb, frame=None):
    """A ValueError unless groups of `na` and `nb` rows hold the same number of whole
    blocks of `block`; `frame`: the frame of an updating group, for the message."""
    where = "" if frame is None else f" in frame {frame} (the groups are updating)"
    xa, xb = block
    if na % xa or nb % xb:
        raise ValueError(
            f"exclusion_block={tuple(block)!r} does not divide the group sizes "
            f"(len(g1)={na}, len(g2)={nb}){where}; each group must consist of whole blocks")
    if na // xa != nb // xb:
        raise ValueError(
            f"exclusion_block={tuple(block)!r} gives {na // xa} blocks in g1 but "
            f"{nb // xb} in g2{where}; both groups must hold the same number of blocks")


def block_labels(n1, n2, block, same):
    """The labels of `block`: each row's block number, 0 .. n1 / xa - 1 on both sides
    (every value present, so they are already :func:`exclusion_labels`' codes); one
    group's when it is used with itself."""
    xa, xb = block
    la = np.arange(n1, dtype=np.int32) // np.int32(xa)
    return la if same else np.concatenate([la, np.arange(n2, dtype=np.int32) // np.int32(xb)])
