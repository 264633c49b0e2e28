"""The analyses' side: :class:`ParallelAnalysisMixin` (``run()`` with this package's
backends) and the short names of the backends."""

from __future__ import annotations

import difflib
import itertools

import numpy as np
from MDAnalysis.analysis.backends import BackendBase, BackendSerial

from ..engine import available_cpus
from .base import _OwnBackend
from .dask_backend import DaskDistributedBackend, _default_client
from .node import NodeBackend
from .trace import mark

__all__ = ["ParallelAnalysisMixin"]


#: the backend names that ``run(backend=...)`` accepts
BACKEND_NAMES = ("serial", "multiprocessing", "dask", "node")


def closest_backend(name: str, names=BACKEND_NAMES) -> str | None:
    """The name of `names` closest to `name` (:func:`difflib.get_close_matches`), or None."""
    close = difflib.get_close_matches(name.strip().lower(), names, n=1, cutoff=0.5)
    return close[0] if close else None


def _backend_name(backend: str, names=BACKEND_NAMES) -> str:
    """The backend name `backend` as ``run()`` knows it (case and spaces ignored).

    Raises
    ------
    ValueError
        For a name that is not one of `names`: the message lists them and the closest
        match (:func:`difflib.get_close_matches`), if any.
    """
    name = backend.strip().lower()
    if name in names:
        return name
    close = closest_backend(name, names)
    hint = f" (did you mean {close!r}?)" if close else ""
    raise ValueError(
        f"backend={backend!r} is not a backend{hint}. The backends are "
        f"{', '.join(map(repr, names))}, or a backend object (an instance of "
        "MDAnalysis.analysis.backends.BackendBase, e.g. NodeBackend(...))")


def _resolve_backend(backend, n_workers, names=BACKEND_NAMES):
    """Map the short names of this package's backends to backend objects.

    Parameters
    ----------
    backend : str or BackendBase
        A name of `names` (case and surrounding spaces ignored) or a backend object.
    n_workers : int or None
        Workers of the backend built from a name.
    names : tuple of str, optional
        The names accepted (the analysis's ``get_supported_backends()``).

    Returns
    -------
    str or BackendBase
        ``'serial'``, ``'multiprocessing'`` or ``'dask'`` (MDAnalysis's, by name), or a
        backend object: the one given, or this package's for ``'node'`` and for ``'dask'``
        with an active ``dask.distributed`` client.

    Raises
    ------
    ValueError
        For an unknown name: the message lists the names and the closest one.
    TypeError
        For anything that is neither a name nor a backend object (a backend class is told
        to be instantiated).
    """
    if isinstance(backend, str):
        name = _backend_name(backend, tuple(names))
        if name == "node":
            return NodeBackend(n_workers=n_workers)
        if name == "dask" and _default_client() is not None:
            return DaskDistributedBackend(n_workers=n_workers)
        return name
    if isinstance(backend, type) and issubclass(backend, BackendBase):
        workers = "" if n_workers is None else f"n_workers={n_workers}"
        raise TypeError(
            f"backend={backend.__name__} is a class: pass an instance, e.g. "
            f"backend={backend.__name__}({workers or 'n_workers=2'})")
    if not isinstance(backend, BackendBase):
        raise TypeError(
            f"backend must be one of the names {', '.join(map(repr, names))} or a backend "
            f"object (an instance of MDAnalysis.analysis.backends.BackendBase); got "
            f"{backend!r} of type {type(backend).__name__}")
    return backend


class ParallelAnalysisMixin:
    """Parallel runs for the analyses of this package (mixed in before ``AnalysisBase``).

    Adds the ``'node'`` backend and dask clients to MDAnalysis's backends, accepts this
    package's backend objects without ``unsupported_backend=True``, shows a progress bar
    over frames with them (``verbose=True``), and shares the cores among the workers of
    MDAnalysis's own backends. Classes using it keep their per-worker threads in
    ``self.n_threads`` (explicit) and ``self._worker_threads`` (used by the engine).
    """

    _analysis_algorithm_is_parallelizable = True

    @classmethod
    def get_supported_backends(cls):
        """Parallel backends of :meth:`run`: ``('serial', 'multiprocessing', 'dask',
        'node')``; also :class:`~mdakit_fastrdf.backends.NodeBackend` and
        :class:`~mdakit_fastrdf.backends.DaskDistributedBackend` objects."""
        return ("serial", "multiprocessing", "dask", "node")

    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, n_workers=None,
            n_parts=None, backend=None, *, unsupported_backend=False, progressbar_kwargs=None):
        """Perform the calculation (see :meth:`MDAnalysis.analysis.base.AnalysisBase.run`).

        Parameters
        ----------
        backend : str or BackendBase, optional
            ``'serial'`` (default), ``'multiprocessing'``, ``'dask'`` (on the active
            ``dask.distributed`` client when there is one, see
            :class:`~mdakit_fastrdf.backends.DaskDistributedBackend`), ``'node'`` (every GPU
            and CPU socket, :class:`~mdakit_fastrdf.backends.NodeBackend`) or a backend
            object.
        n_workers : int, optional
            Worker processes. With MDAnalysis's backends the cores are shared among them
            (unless ``n_threads`` was given); with ``'node'`` it caps the planned workers.
        n_parts : int, optional
            Parts the frames are cut into. The node and dask-client backends default to
            many small parts (dynamic load balancing).
        verbose : bool, optional
            Progress bar over frames: in the caller with the node and dask-client backends,
            per frame with ``'serial'`` (MDAnalysis allows no bar with its other backends).

        Other parameters are those of MDAnalysis's ``run``.
        """
        explicit = isinstance(backend, _OwnBackend)
        backend = _resolve_backend("serial" if backend is None else backend, n_workers,
                                   self.get_supported_backends())
        if isinstance(backend, _OwnBackend):
            if explicit and n_workers is not None and n_workers != backend.n_workers:
                raise ValueError(
                    f"n_workers specified twice: {backend.n_workers} in the backend object and "
                    f"{n_workers} in run(); remove it from run()")
            self._worker_threads = self.n_threads
            self._part_sizes = None
            if n_parts is None:
                n_frames = len(self._setup_computation_groups(
                    1, start=start, stop=stop, step=step, frames=frames)[0])
                sizes = getattr(backend, "part_sizes", lambda n: None)(n_frames)
                if sizes:
                    self._part_sizes = list(sizes)
                    n_parts = len(sizes)
                else:
                    n_parts = backend.parts_for(n_frames)
            verbose = getattr(self, "_verbose", False) if verbose is None else verbose
            backend._progress = (bool(verbose), dict(progressbar_kwargs or {}))
            mark("run", "parent")
            try:
                return super().run(start=start, stop=stop, step=step, frames=frames,
                                   verbose=False, n_workers=None, n_parts=n_parts,
                                   backend=backend, unsupported_backend=unsupported_backend,
                                   progressbar_kwargs=None)
            finally:
                backend._progress = (False, {})
                self._part_sizes = None
                mark("run_end", "parent")
        if self.n_threads is None and n_workers and n_workers > 1 and not isinstance(
                backend, BackendSerial) and backend != "serial":
            self._worker_threads = max(1, available_cpus() // n_workers)
        else:
            self._worker_threads = self.n_threads
        return super().run(start=start, stop=stop, step=step, frames=frames, verbose=verbose,
                           n_workers=n_workers, n_parts=n_parts, backend=backend,
                           unsupported_backend=unsupported_backend,
                           progressbar_kwargs=progressbar_kwargs)

    def _setup_computation_groups(self, n_parts, start=None, stop=None, step=None,
                                  frames=None):
        """MDAnalysis's even split, or the part sizes a backend of this package chose
        (:meth:`NodeBackend.part_sizes <mdakit_fastrdf.backends.NodeBackend.part_sizes>`:
        parts that shrink towards the end), in frame order either way."""
        sizes = getattr(self, "_part_sizes", None)
        if not sizes or n_parts != len(sizes) or n_parts <= 1:
            return super()._setup_computation_groups(n_parts, start=start, stop=stop,
                                                     step=step, frames=frames)
        whole = super()._setup_computation_groups(1, start=start, stop=stop, step=step,
                                                  frames=frames)[0]
        if len(whole) != sum(sizes):
            return super()._setup_computation_groups(n_parts, start=start, stop=stop,
                                                     step=step, frames=frames)
        bounds = np.cumsum([0, *sizes])
        return [whole[a:b] for a, b in itertools.pairwise(bounds)]

    def _configure_backend(self, backend, n_workers, unsupported_backend=False):
        if isinstance(backend, _OwnBackend):
            if any(not t.parallelizable for t in self._trajectory.transformations):
                raise ValueError(
                    "Trajectory should not have associated unparallelizable transformations")
            return backend
        return super()._configure_backend(backend, n_workers, unsupported_backend)
