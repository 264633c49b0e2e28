"""The hooks through which the node backend's readers prepare an analysis's frames
(:mod:`mdakit_fastrdf.backends.feed`; the contract is :mod:`mdakit_fastrdf.backends.protocol`)."""

from __future__ import annotations

import numpy as np

from ..backends.frames import FedTimestep
from ..backends.trace import mark
from ..engine import prepare_box

__all__ = ["FedFrames"]


class FedFrames:
    """Mixin of :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase`: the reader side
    of a fed run (a reader process's copy of the analysis reads and prepares rows) and the
    worker side (its rows come from a reader, or from this process)."""

    def _plan_device(self) -> str:
        """The device a backend plans workers for (the node backend: GPU workers or not)."""
        return self.device if isinstance(self.device, str) else "auto"

    def _warm_up(self):
        """Create this worker's engine state before its first frame (on a GPU: the CUDA
        context and the device's measured root error, ~0.3 s), while readers read: the
        engine of every part of the worker reuses it."""
        layout = self._layout()
        mark("layout", "gpu")
        self._make_engine()._make_impl(layout.offsets, layout.pairs)

    def _feed_rows(self) -> int:
        """Rows per frame of a reader's slot: the layout's atoms (or centres)."""
        return len(self._layout().ix)

    def _prepare_reader(self) -> int:
        """Set up a reader process's copy of the analysis; the number of rows per frame."""
        self._layout_cache = layout = self._layout()
        layout.ix = np.ascontiguousarray(layout.ix, dtype=np.int64)
        self._local_blocks = None
        self._rmax = self.rdf_settings["range"][1]
        return len(layout.ix)

    def _read_frame(self, ts, out):
        """Reader side: the rows of frame `ts` into `out` (float32, checked as in a serial
        run; the errors name the frame), prepared for the kernels when
        :meth:`_reader_prepares`. Returns the kind of the box the kernels use, or None
        when the rows are not prepared."""
        self._ts = ts
        coords = self._take_positions(self._layout_cache.ix, out)
        if coords is not out:
            out[...] = coords
        if not self._reader_prepares():
            return None
        return self._prepare_rows(out, prepare_box(ts.dimensions)).kind

    def _frame_positions(self):
        """The rows of the current frame: a reader's (fed workers), or this process's."""
        if isinstance(self._ts, FedTimestep):
            return self._ts.rows
        ix = self._layout_cache.ix
        return self._take_positions(ix, self._buf[:len(ix)])
