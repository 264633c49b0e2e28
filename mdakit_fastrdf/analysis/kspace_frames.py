"""The per-frame k-space amplitudes of an analysis on the pair-histogram base.

A mixin (listed before :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase` among the
bases) for the analyses that sum :math:`A_a(\\mathbf{k})` every frame
(:class:`~mdakit_fastrdf.IntermediateScattering`, :class:`~mdakit_fastrdf.StructureFactor`):
it makes each worker's :class:`~mdakit_fastrdf.engine.kspace.KSpaceEngine` and, on a GPU, an
:class:`~mdakit_fastrdf.engine.kspace.AmplitudesInFlight` that sums each frame in a thread of
its own while the frame loop reads the next frames; both are made in the worker (never
pickled), and the frames still in flight are stored before the worker's results are handed
back.
"""

from __future__ import annotations


class KSpaceFrames:
    """Per-frame k-space amplitudes: :meth:`_start_kspace` in ``_start_part``, then
    :meth:`_frame_amplitudes` for each frame; a subclass supplies
    :meth:`_store_amplitudes`."""

    _kspace = None
    _amplitude_queue = None

    def _store_amplitudes(self, key, amplitudes):
        """Store one frame's amplitudes (``key``: what :meth:`_frame_amplitudes` was given),
        called in the order of the frames."""
        raise NotImplementedError

    def _start_kspace(self):
        """Make this worker's k-space engine on the analysis's device (``'auto'`` sums on
        the CPU: the same bits in every worker) and, on a GPU, the queue of frames in
        flight."""
        from ..engine.kspace import AmplitudesInFlight, KSpaceEngine

        device = self.device if str(self.device).startswith("cuda") else "cpu"
        self._kspace = KSpaceEngine(device=device, n_threads=self.worker_threads)
        self._amplitude_queue = None if device == "cpu" else \
            AmplitudesInFlight(self._kspace, self._store_amplitudes)

    def _frame_amplitudes(self, key, positions, offsets, box_vectors, n):
        """The amplitudes of one frame's `positions`, handed to the store with `key`: now on
        the CPU, from the queue's thread on a GPU."""
        if self._amplitude_queue is not None:
            self._amplitude_queue.submit(key, positions, offsets, box_vectors, n)
        else:
            self._store_amplitudes(key, self._kspace.amplitudes(positions, offsets, box_vectors, n))

    def _synchronize(self):
        queue, self._amplitude_queue = self._amplitude_queue, None
        try:
            if queue is not None:
                queue.finish()
        finally:
            super()._synchronize()

    def __getstate__(self):
        state = super().__getstate__()
        state.update(_kspace=None, _amplitude_queue=None)
        return state
