"""The parts of a parallel run: how a run's frames are split among workers, and what a part
reads beyond its own frames (a halo, for time correlations)."""

from __future__ import annotations

import os

import numpy as np

from ..backends.frames import WorkerFrames, frame_source
from .blocks import concatenate_parts, sum_parts

__all__ = ["RunParts"]


class RunParts:
    """Mixin of :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase`: the split of a run
    into parts, with the hooks :meth:`_halo` and :meth:`_finish_part`, and a worker's
    frames (read by the worker, or fed by readers)."""

    #: Results a part computes itself (in :meth:`_finish_part`) and how the parts' values
    #: merge: ``'sum'`` (integer counts, exact in any split) or ``'concatenate'`` (one row
    #: per own frame, in the parts' order).
    part_results: dict = {}
    _PART_MERGES = {"sum": sum_parts, "concatenate": concatenate_parts}

    def _part_lookup(self) -> dict:
        """Aggregators of :attr:`part_results`, for the base's ``_get_aggregator``."""
        return {name: self._PART_MERGES[how] for name, how in self.part_results.items()}

    def _start_part(self, n_frames):
        """Called in the worker before a part's frames (at the end of ``_prepare``), with
        their number, its halo's included: for what a part keeps of its frames (their
        positions, a correlation's workspace) and its memory check. Default: nothing."""

    def _halo(self) -> int:
        """Frames each part of a parallel run reads beyond its own (default 0). A time
        correlation gives its longest lag: every part then also holds the frames its own
        time origins reach (:meth:`_setup_computation_groups`), and :meth:`_finish_part`
        computes what its own frames start."""
        return 0

    def _finish_part(self, index, n_own):
        """Called in the worker at the end of a part's frames (after the frame loop), with
        `index` (the positions in the run of the part's frames, its halo's last) and
        `n_own`, the number of its own frames. Default: nothing."""

    def _prepare_sliced_trajectory(self, slicer):
        super()._prepare_sliced_trajectory(slicer)
        # In a worker process (multiprocessing, dask processes, the node backend) iterate
        # without the closing rewind; in the process that called run() keep MDAnalysis's
        # behaviour (the trajectory ends on its first frame).
        if (isinstance(slicer, np.ndarray)
                and os.getpid() != getattr(self, "_run_pid", os.getpid())):
            feed = frame_source()  # (a worker fed by readers: the backend's)
            self._sliced_trajectory = (WorkerFrames(self._trajectory, slicer) if feed is None
                                       else feed.frames(self, slicer))

    def _setup_computation_groups(self, n_parts, start=None, stop=None, step=None,
                                  frames=None):
        """The parts of the run (the parallel backends' split); with a :meth:`_halo`, each
        but the last followed by the next ``halo`` frames of the run, and parts of fewer
        than twice the halo's frames merged (a halo is read twice). ``_own_frames`` maps a
        part's first position in the run to its own frames."""
        groups = super()._setup_computation_groups(n_parts, start=start, stop=stop,
                                                   step=step, frames=frames)
        self._own_frames = {}
        halo = int(self._halo())
        if len(groups) <= 1 or halo == 0:
            return groups
        whole = np.concatenate(groups)  # (rows: the run's positions 0, 1, ... in order)
        n = max(1, min(len(groups), len(whole) // (2 * halo)))
        if n != len(groups):
            groups = np.array_split(whole, n)
        out = []
        for k, group in enumerate(groups):
            if k + 1 < len(groups):
                self._own_frames[int(group[0, 0])] = len(group)
                end = int(group[-1, 0]) + 1
                group = np.concatenate([group, whole[end:end + halo]])
            out.append(group)
        return out
