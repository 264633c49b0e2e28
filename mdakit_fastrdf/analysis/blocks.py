r"""Blocks and parts: the frames of a run cut into blocks for error bars (block means and
their standard error), and how the results of parallel parts are merged (counts summed,
per-frame rows joined and added in frame order, so that every backend gives the same
bits)."""

from __future__ import annotations

import numbers

import numpy as np
from MDAnalysis.analysis.results import Results, ResultsGroup

__all__ = ["MIN_BLOCKS", "block_plan", "block_sem", "concatenate_parts", "few_blocks_message",
           "order_frames", "parts_aggregator",
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


class BlockAveraging:
    """Block averages of a pair-histogram analysis (mixed into
    :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase`): each frame's counts go into
    its block's row (``results.block_<field>``), the rows are summed into the totals at
    the end of a worker's frames and merged over the parts, and after the run each block is
    normalised exactly as the whole run and ``<name>_sem`` is the standard error of the
    block mean. It uses the base's ``_block_plan``, ``_local_blocks``, ``_count_fields``,
    ``_block_outputs``, ``_frame_rows`` and ``_normalise``."""

    def _ensure_block_arrays(self):
        """Allocate (once per worker, after ``_prepare``) ``results.block_<field>`` for every
        count field, with one row per block, and the views the kernels write into."""
        if self._block_arrays is not None:
            return self._block_arrays
        n_blocks = int(self._block_plan.max()) + 1
        views = {}
        for field in self._count_fields:
            target = self.results[field]
            if isinstance(target, list):
                blocks = [np.zeros((n_blocks,) + t.shape, dtype=t.dtype) for t in target]
                for k, arr in enumerate(blocks):
                    views[(field, k)] = [arr[b] for b in range(n_blocks)]
            else:
                blocks = np.zeros((n_blocks,) + target.shape, dtype=target.dtype)
                views[(field, None)] = [blocks[b] for b in range(n_blocks)]
            self.results["block_" + field] = blocks
        self.results.block_n_frames = np.zeros(n_blocks, dtype=np.int64)
        self.results.block_volume_cum = np.zeros(n_blocks, dtype=np.float64)
        self._block_arrays = views
        return views

    def _frame_out(self, out, field="count_uint64", index=None):
        """The array the counts of the current frame go into.

        Without blocks: `out` (a view of ``results.<field>``, or of its item `index`). With
        blocks: the same view of the row of the frame's block. The views are cached, so that
        a GPU engine sees one output object for all the frames of a block (it adds its queued
        counts into the previous output when the output changes)."""
        if self._local_blocks is None:
            return out
        views = self._ensure_block_arrays()[(field, index)]
        b = self._local_blocks[self._frame_index]
        if views[b].shape != out.shape:
            views[b] = views[b].reshape(out.shape)
        return views[b]

    def _finish_blocks(self):
        """End of a worker's frames: add the blocks' counts into the totals."""
        self._ensure_block_arrays()
        for field in self._count_fields:
            target = self.results[field]
            blocks = self.results["block_" + field]
            if isinstance(target, list):
                for t, b in zip(target, blocks):
                    t += b.sum(axis=0, dtype=b.dtype)
            else:
                target += blocks.sum(axis=0, dtype=blocks.dtype)

    def _block_lookup(self):
        """Aggregators of the block results, for ``_get_aggregator`` (none without
        blocks)."""
        if getattr(self, "_block_plan", None) is None:
            return {}
        lookup = {"block_n_frames": ResultsGroup.ndarray_sum,
                  "block_volume_cum": ResultsGroup.ndarray_sum}
        for field in self._count_fields:
            lookup["block_" + field] = sum_parts
        return lookup

    def _conclude_blocks(self):
        """Normalise every block exactly as the whole run (with the block's own frames and
        mean box volume) and add ``block_<name>`` (one row per block) and ``<name>_sem``
        (the standard error of the block mean) for every declared block field."""
        full = self.results
        saved = {k: getattr(self, k) for k in ("n_frames", "volume_cum") if hasattr(self, k)}
        per_block = {name: [] for name in self._block_outputs}
        try:
            for b in range(len(full.block_n_frames)):
                part = Results(edges=full.edges, bins=full.bins)
                for field in self._count_fields:
                    blocks = full["block_" + field]
                    part[field] = ([x[b] for x in blocks] if isinstance(blocks, list)
                                   else blocks[b])
                if "volume_cum" in full:
                    part.volume_cum = full.block_volume_cum[b]
                if "frame_index" in full:  # the block's rows, in frame order
                    mine = self._block_plan[full.frame_index] == b
                    part.frame_index = full.frame_index[mine]
                    for name in self._frame_rows():
                        part[name] = full[name][mine]
                self.results = part
                self.n_frames = int(full.block_n_frames[b])
                self._normalise(part)
                for name in self._block_outputs:
                    if name in part:
                        per_block[name].append(part[name])
        finally:
            self.results = full
            for k, v in saved.items():
                setattr(self, k, v)
        for name, values in per_block.items():
            if not values:
                continue
            if isinstance(values[0], list):  # site histograms: one array per pair of groups
                stacked = [np.stack(v) for v in zip(*values)]
                full["block_" + name] = stacked
                full[name + "_sem"] = [block_sem(s) for s in stacked]
            else:
                stacked = np.stack(values)
                full["block_" + name] = stacked
                full[name + "_sem"] = block_sem(stacked)


def parts_aggregator(count_fields, frame_rows, block_lookup):
    """How MDAnalysis merges the results of a run's parts: the `count_fields` summed,
    ``volume_cum`` added, ``bins`` and ``edges`` the same in every part, the per-frame rows
    `frame_rows` (and ``frame_index``) joined, and the blocks' fields (`block_lookup`)."""
    lookup = {name: sum_parts for name in count_fields}
    lookup.update({"volume_cum": ResultsGroup.ndarray_sum,
                   "bins": same_in_every_part,
                   "edges": same_in_every_part})
    if frame_rows:
        lookup.update({name: concatenate_parts for name in ("frame_index", *frame_rows)})
    lookup.update(block_lookup)
    return ResultsGroup(lookup=lookup)


def order_frames(res, frame_rows):
    """Put the per-frame rows `frame_rows` of the merged results `res` in frame order
    (``res.frame_index``)."""
    if "frame_index" not in res:
        return
    if np.all(res.frame_index[1:] > res.frame_index[:-1]):  # in order (a serial run)
        return
    order = np.argsort(res.frame_index, kind="stable")
    res.frame_index = np.ascontiguousarray(res.frame_index[order])
    for name in frame_rows:
        res[name] = np.ascontiguousarray(res[name][order])
