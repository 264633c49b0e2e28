"""What the backends of this package share: their base class, and the result of one part
that a worker hands back."""

from __future__ import annotations

from functools import partial

import numpy as np
from MDAnalysis.analysis.backends import BackendBase


class _PartResult:
    """What a worker hands back for one part: all that ``AnalysisBase.run`` reads from the
    objects its backend returns (``frames``, ``times``, ``results``), without the Universe."""

    __slots__ = ("frames", "results", "times")

    def __init__(self, obj):
        # copies: the worker's analysis object runs its next part on the same Results
        # (a dask worker keeps this result in memory while it does)
        from MDAnalysis.analysis.results import Results

        self.frames = np.array(obj.frames, copy=True)
        self.times = np.array(obj.times, copy=True)
        self.results = Results(**obj.results)

    def __getstate__(self):
        return (self.frames, self.times, self.results)

    def __setstate__(self, state):
        self.frames, self.times, self.results = state


def _quiet(func):
    """``func`` (``partial(analysis._compute, ...)``) with the workers' progress bars off."""
    if isinstance(func, partial):
        return partial(func.func, *func.args, **{**(func.keywords or {}), "verbose": False,
                                                  "progressbar_kwargs": {}})
    return func


def _analysis_of(func):
    target = func.func if isinstance(func, partial) else func
    return getattr(target, "__self__", None)


class _OwnBackend(BackendBase):
    """Backends of this package: :meth:`run` of the package's analyses accepts them
    without ``unsupported_backend=True``, shows their progress bar, and lets them choose
    the number of parts and each worker's threads."""

    _progress = (False, {})

    def parts_for(self, n_frames: int) -> int:
        return max(1, min(n_frames, 8 * self.n_workers))

    def _progress_bar(self, total):
        verbose, kwargs = self._progress
        if not verbose:
            return None
        from MDAnalysis.lib.log import ProgressBar

        kwargs = dict(kwargs)
        kwargs.setdefault("desc", f"{type(self).__name__}")
        return ProgressBar(total=total, verbose=True, **kwargs)
