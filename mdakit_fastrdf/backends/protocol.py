"""What the node backend asks of an analysis: the hooks it calls, named in one place.

The backends import no analysis. An analysis that runs on the node backend (every analysis
of this package, through :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase`)
provides these methods; the backends call nothing else on it and set no attribute on it.
What a worker hands the analysis's frame loop comes from this layer instead: the frames
(:func:`~.frames.frame_source`, asked by the analysis) and, for a frame that readers
prepared, its rows on the :class:`~.frames.FedTimestep` itself.

An analysis of MDAnalysis's own (any :class:`~MDAnalysis.analysis.base.AnalysisBase`
without these hooks) still runs: its workers read their own frames on the CPU plan.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["FedAnalysis", "PlannedAnalysis"]


@runtime_checkable
class PlannedAnalysis(Protocol):
    """The hooks the node backend's parent calls to plan a run."""

    def _plan_device(self) -> str:
        """The device the workers are planned for: ``'cpu'``, ``'auto'``, ``'cuda[:N]'``."""

    def _can_feed(self) -> bool:
        """Whether readers may prepare this analysis's frames (fixed rows and the box)."""

    def _feed_rows(self) -> int:
        """Rows per frame of a reader's slot (when :meth:`_can_feed`)."""


@runtime_checkable
class FedAnalysis(PlannedAnalysis, Protocol):
    """The hooks the node backend's workers and readers call."""

    def _warm_up(self) -> None:
        """A GPU worker's engine state (CUDA context) before its first frame."""

    def _prepare_reader(self) -> int:
        """A reader's set-up; the rows per frame (as :meth:`_feed_rows`)."""

    def _read_frame(self, ts, out):
        """A reader's side of frame `ts`: its rows into `out`; the kind of the box the
        kernels use when the reader prepared the rows, else None."""
