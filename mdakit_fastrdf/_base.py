"""What every RDF analysis of this package shares.

:class:`RDFBase` holds the machinery common to :class:`~mdakit_fastrdf.InterRDF`,
:class:`~mdakit_fastrdf.InterRDF_s` and :class:`~mdakit_fastrdf.SpeciesRDF`: argument checks,
the parallel backends (cores shared among workers, compiled state created lazily in each
worker and never pickled, a GPU engine synchronised before a worker hands back its counts),
the box of a frame, the reproduction of MDAnalysis's coordinate handling and the shell volumes
of the normalisations.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from MDAnalysis.analysis.base import AnalysisBase

from .backends import ParallelAnalysisMixin

from ._engine import (
    NO_BOX,
    ORTHO,
    ORTHO_SCALED,
    Box,
    Engine,
    prepare_box,
    validate_device,
    validate_method,
    validate_n_threads,
    validate_precision,
    wrap_positions,
)

_NORMS = ("rdf", "density", "none")


def check_atomgroup(ag, name):
    """TypeError/ValueError unless ``ag`` is a static, non-empty AtomGroup."""
    from MDAnalysis.core.groups import AtomGroup, UpdatingAtomGroup

    if not isinstance(ag, AtomGroup):
        raise TypeError(f"{name} must be an MDAnalysis AtomGroup, got {type(ag).__name__}")
    if isinstance(ag, UpdatingAtomGroup):
        raise ValueError(
            f"{name} is an UpdatingAtomGroup; its size changes between frames, which the "
            f"normalisation of InterRDF cannot describe. Pass a static AtomGroup "
            f"(e.g. {name}.atoms) or select per frame yourself."
        )
    if len(ag) == 0:
        raise ValueError(f"{name} is an empty AtomGroup: select at least one atom")


def check_nbins(nbins):
    if isinstance(nbins, bool) or not isinstance(nbins, numbers.Integral):
        raise TypeError(f"nbins must be an integer, got {nbins!r}")
    if nbins < 1:
        raise ValueError(f"nbins must be >= 1, got {nbins}")
    return int(nbins)


def check_range(rng):
    try:
        rmin, rmax = (float(v) for v in rng)
    except (TypeError, ValueError):
        raise ValueError(f"range must be a pair (rmin, rmax) of numbers, got {rng!r}") from None
    if not (np.isfinite(rmin) and np.isfinite(rmax)):
        raise ValueError(f"range must be finite, got {rng!r}")
    if rmin < 0:
        raise ValueError(f"range: rmin must be >= 0 (distances are never negative), got {rng!r}")
    if not rmax > rmin:
        raise ValueError(f"range must be increasing (rmin < rmax), got {rng!r}")
    return rmin, rmax


def check_norm(norm):
    norm = str(norm).lower()
    if norm not in _NORMS:
        raise ValueError(f"'{norm}' is an invalid norm. Use 'rdf', 'density' or 'none'.")
    return norm


def mdanalysis_uses_grid(n1, n2, rmax, box: Box, coords) -> bool:
    """Whether MDAnalysis's ``capped_distance`` takes its grid search (else brute force) for
    groups of ``n1`` and ``n2`` atoms (``_determine_method``); ``coords``: both groups'
    positions (only used without a box)."""
    if n1 < 10 or n2 < 10:
        return False
    if n1 * n2 >= 1e8:
        return True
    if box.kind == NO_BOX:
        size = coords.max(axis=0) - coords.min(axis=0)
    elif box.kind == ORTHO:
        size = np.diag(box.vectors32)
    else:
        size = box.vectors32.max(axis=0) - box.vectors32.min(axis=0)
    return not np.any(rmax > 0.3 * size)


def mdanalysis_compat(box: Box, coords, n1, n2, rmax) -> Box:
    """Prepare ``coords`` (in place) and the box as MDAnalysis's capped_distance would.

    ``coords`` holds the positions of both groups (``n1`` then ``n2`` atoms, or only one group
    when it is used with itself). InterRDF's distances come from ``capped_distance``, which
    picks a grid search or brute force from the sizes (``_determine_method``). The grid search
    wraps positions into the box in float32 (without a box it shifts them by their minimum);
    brute force wraps them only for triclinic boxes and, for orthorhombic ones, takes the
    minimum image with a float32 inverse box length. Doing the same operations gives the same
    distances. Returns the box the kernel must use.
    """
    grid = mdanalysis_uses_grid(n1, n2, rmax, box, coords)
    if box.kind == NO_BOX:
        if grid:
            lmin = coords.min(axis=0)
            coords -= lmin - 0.1 * rmax
        return box
    if box.kind == ORTHO and not grid:
        return Box(ORTHO_SCALED, box.vectors32)
    wrap_positions(coords, box)
    return box


def shell_volumes(edges):
    r"""Volumes :math:`\frac{4}{3}\pi(r_{k+1}^3 - r_k^3)` of the spherical shells of ``edges``
    (computed as MDAnalysis does)."""
    vols = np.power(edges, 3)
    return 4 / 3 * np.pi * np.diff(vols)


def histogram_edges(nbins, rng):
    """``numpy.histogram``'s edges (as MDAnalysis builds them) and the bin centres."""
    _, edges = np.histogram([-1], bins=nbins, range=rng)
    return edges, 0.5 * (edges[:-1] + edges[1:])


class RDFBase(ParallelAnalysisMixin, AnalysisBase):
    """Base of the package's RDF analyses (not public API).

    Subclasses set ``self.device``, ``self.precision``, ``self.n_threads`` and ``self.method``
    through
    :meth:`_init_compute` and build their engine with :meth:`_make_engine`. The parallel
    backends of :meth:`run` (MDAnalysis's, ``'node'`` and dask clients) come from
    :class:`~mdakit_fastrdf.backends.ParallelAnalysisMixin`.
    """

    def _init_compute(self, device, precision, n_threads, method="auto"):
        self.device = validate_device(device)
        self.precision = validate_precision(precision)
        self.n_threads = validate_n_threads(n_threads)
        self.method = validate_method(method)
        self._worker_threads = self.n_threads
        self._engine = None

    def _make_engine(self):
        """The engine of this worker (created in the worker, in ``_prepare``)."""
        return Engine(self.device, self.precision, self._worker_threads, method=self.method)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_engine"] = None
        return state

    def _compute(self, indexed_frames, verbose=None, *, progressbar_kwargs=None):
        # A GPU engine queues frames asynchronously; collect its counts before the worker's
        # results are handed back.
        super()._compute(indexed_frames, verbose=verbose, progressbar_kwargs=progressbar_kwargs)
        self._synchronize()
        return self

    def _synchronize(self):
        if getattr(self, "_engine", None) is not None:
            self._engine.synchronize()

    def _frame_box(self) -> Box:
        """The checked box of the current frame; norm='rdf' without a box is an error."""
        ts = self._ts
        box = prepare_box(ts.dimensions)
        if self.norm == "rdf" and box.kind == NO_BOX:
            raise ValueError(
                "norm='rdf' needs the box volume, but this trajectory has no box "
                f"(frame {ts.frame}: dimensions={ts.dimensions}). Use norm='density' or "
                "norm='none', or set the box (e.g. with a transformation)."
            )
        return box

    def _take_positions(self, ix, out):
        """Copy the positions of atoms ``ix`` of this frame into ``out`` (float32), checked."""
        ts = self._ts
        np.take(ts.positions, ix, axis=0, out=out)
        if not np.isfinite(out).all():
            raise ValueError(
                f"coordinates of frame {ts.frame} hold NaN or infinite values; "
                "the RDF of such a frame is undefined"
            )
        return out

    def _deprecated(self, name, use, since="2.0.0"):
        warnings.warn(
            f"The `{name}` attribute was deprecated in MDAnalysis {since} and will be removed "
            f"in MDAnalysis 3.0.0. Please use `results.{use}` instead",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.results[use]
