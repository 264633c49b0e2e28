r"""Blocks and parts: the frames of a run cut into blocks for error bars (block means and
their standard error), and how the results of parallel parts are merged (counts summed,
per-frame rows joined and added in frame order, so that every backend gives the same
bits)."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["MIN_BLOCKS", "block_plan", "block_sem", "concatenate_parts", "few_blocks_message",
           "frame_sum", "same_in_every_part", "sum_parts"]


def block_plan(blocks, n_frames):
    """The block of each of the `n_frames` frames of a run: `blocks` consecutive blocks
    whose sizes differ by at most one frame (as :func:`numpy.array_split` splits)."""
    if isinstance(blocks, bool) or not isinstance(blocks, numbers.Integral):
        raise TypeError(f"blocks must be an integer, got {blocks!r}")
    if blocks < 2:
        raise ValueError(f"blocks must be at least 2 to estimate an error, got {blocks}")
    if blocks > n_frames:
        raise ValueError(
            f"blocks={blocks} is more than the {n_frames} frames of the run: each block needs "
            f"at least one frame"
        )
    sizes = [len(part) for part in np.array_split(np.arange(n_frames), blocks)]
    return np.repeat(np.arange(blocks), sizes)


#: Fewer blocks than this give an error bar that means little (``run`` warns).
MIN_BLOCKS = 4
#: Two-sided 95 % Student t factors for B - 1 = 1, 2, 3 degrees of freedom.
_T95 = {1: 12.71, 2: 4.30, 3: 3.18}


def few_blocks_message(blocks):
    r"""The warning for ``run(blocks=B)`` with :math:`B <` :data:`MIN_BLOCKS`, or None.

    The standard error of :math:`B` block means has :math:`B - 1` degrees of freedom: its
    own relative uncertainty is about :math:`1/\sqrt{2(B - 1)}` (71 % for two blocks,
    41 % for four), and a 95 % interval is :math:`\pm t_{0.975, B-1}` standard errors
    (12.7 for two blocks, 4.3 for three, 3.2 for four), not :math:`\pm 1.96`."""
    if blocks >= MIN_BLOCKS:
        return None
    dof = blocks - 1
    return (f"blocks={blocks}: an error bar from fewer than {MIN_BLOCKS} blocks means little: "
            f"it has {dof} degree(s) of freedom, so it is itself uncertain by about "
            f"{100 / np.sqrt(2 * dof):.0f} %, and a 95 % interval is +-{_T95[dof]} standard "
            f"errors, not +-1.96. Use at least {MIN_BLOCKS} blocks (blocks={MIN_BLOCKS} or "
            f"more), each longer than the correlation time of what you look at")


def block_sem(values):
    r"""Standard error of the mean over blocks (axis 0):
    :math:`\sqrt{\sum_b (x_b - \bar x)^2 / (B (B - 1))}`."""
    values = np.asarray(values, dtype=np.float64)
    return values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])


def sum_parts(values):
    """Aggregate the workers' counts (ResultsGroup lookup): arrays are summed; lists of
    arrays item by item, in place into a copy of the first part's arrays (one extra set of
    histograms at most; a single part is handed on uncopied)."""
    if not isinstance(values[0], list):
        return np.sum(values, axis=0)
    if len(values) == 1:
        return list(values[0])
    out = []
    for arrays in zip(*values):
        acc = np.array(arrays[0], copy=True)
        for a in arrays[1:]:
            acc += a
        out.append(acc)
    return out


def frame_sum(rows):
    """The sum of per-frame `rows` (axis 0), added one frame after the other in the order
    of the rows (frame order, as the base hands them over): the same floating-point
    operations whatever backend or split computed the rows, hence the same bits."""
    rows = np.asarray(rows, dtype=np.float64)
    acc = np.zeros(rows.shape[1:], dtype=np.float64)
    for row in rows:
        acc += row
    return acc


def same_in_every_part(values):
    """Aggregate a result every worker computes alike (the bin edges and centres): the first
    part's. (A mean of the parts, MDAnalysis's choice, can change the last bit: with three
    parts (e + e + e) / 3 need not be e.)"""
    return values[0]


def concatenate_parts(values):
    """Aggregate the workers' per-frame rows (ResultsGroup lookup): joined along axis 0
    (the base puts them in frame order afterwards)."""
    return np.concatenate([np.asarray(v) for v in values], axis=0)
