"""The parts of a run on the workers of a :class:`dask.distributed.Client`.

(Named ``dask_backend`` so that it is never taken for the ``dask`` package.)
"""

from __future__ import annotations

import collections
import pickle
import threading
import uuid

from ..engine import (
    WorkerPlacement,
    available_cpus,
    set_worker_placement,
    worker_placement,
)
from .base import _OwnBackend, _PartResult, _quiet
from .planning import _AUTO, _check_auto_int

__all__ = ["DaskDistributedBackend"]

_dask_cache: dict = {}
_dask_lock = threading.Lock()


def _dask_part(payload, token, computation, threads):
    """Run one part on a dask worker; the unpickled analysis is kept per run and thread."""
    key = (token, threading.get_ident())
    with _dask_lock:
        func = _dask_cache.get(key)
        if func is None:
            for k in [k for k in _dask_cache if k[0] != token]:
                del _dask_cache[k]
    if func is None:
        func = pickle.loads(payload)
        with _dask_lock:
            _dask_cache[key] = func
    placement = worker_placement()
    if placement is None or placement.n_threads != threads or placement.device is not None:
        set_worker_placement(WorkerPlacement(device=None, n_threads=threads, kind="dask"))
    return _PartResult(func(computation))


def _default_client():
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


class DaskDistributedBackend(_OwnBackend):
    r"""Run the parts on the workers of a :class:`dask.distributed.Client`.

    MDAnalysis's ``'dask'`` backend calls ``dask.compute(..., scheduler='processes')`` and so
    always starts a local process pool, whatever client is active. The analyses of this
    package use this backend instead for ``backend='dask'`` whenever a distributed client is
    active (:func:`distributed.default_client`), or when given explicitly.

    Parameters
    ----------
    client : distributed.Client, optional
        Default: the active client.
    n_workers : int, optional
        Number of workers to plan parts for (default: the cluster's workers).
    threads_per_worker : 'auto' or int, optional
        CPU threads of each worker's kernel. ``'auto'``: the cores the worker process may
        use, divided by the number of workers on its host. An analysis's own ``n_threads``
        wins.
    parts_per_worker : int, optional
        Parts per worker (default 4): dask hands the next part to the first free worker.
    resources : dict, optional
        Worker resources each part needs, e.g. ``{'GPU': 1}`` with workers started with
        ``--resources GPU=1``.

    Notes
    -----
    Each worker process unpickles the analysis once per run (and thread) and runs its
    parts on it. For GPUs start one worker process per GPU with one thread, each seeing
    its GPU as device 0 (``CUDA_VISIBLE_DEVICES``), e.g. with dask-cuda's
    ``LocalCUDACluster`` or the dask-jobqueue / dask-mpi recipes in the docs; the analysis's
    ``device='auto'`` then uses that GPU.
    """

    def __init__(self, client=None, n_workers=None, *, threads_per_worker=_AUTO,
                 parts_per_worker=4, resources=None):
        if client is None:
            client = _default_client()
            if client is None:
                raise ValueError(
                    "DaskDistributedBackend: no dask.distributed Client is active; create one "
                    "(client = distributed.Client(...)) or pass client=...")
        if not hasattr(client, "submit") or not hasattr(client, "scheduler_info"):
            raise TypeError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
        self.client = client
        self.threads_per_worker = _check_auto_int(
            "threads_per_worker", threads_per_worker, 1, "it is the CPU threads per dask worker")
        self.parts_per_worker = _check_auto_int("parts_per_worker", parts_per_worker, 1,
                                                "it is the number of parts per worker")
        if resources is not None and not isinstance(resources, dict):
            raise TypeError(f"resources must be a dict such as {{'GPU': 1}}, got {resources!r}")
        self.resources = resources
        if n_workers is None:
            n_workers = max(1, len(self._workers()))
        super().__init__(n_workers)

    def _workers(self):
        try:
            return self.client.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # older distributed
            return self.client.scheduler_info()["workers"]

    def parts_for(self, n_frames: int) -> int:
        return max(1, min(n_frames, self.parts_per_worker * self.n_workers))

    def apply(self, func, computations):
        """Submit one task per computation to the client; return the results in order."""
        from distributed import as_completed

        try:
            import cloudpickle as _pickler
        except ImportError:  # pragma: no cover
            _pickler = pickle
        computations = list(computations)
        if not computations:
            return []
        token = uuid.uuid4().hex
        payload = self.client.scatter(_pickler.dumps(_quiet(func)), broadcast=True, hash=False)
        if self.threads_per_worker == _AUTO:
            # resolved on each worker: its cores / (worker processes on its host x its threads)
            threads = dict(collections.Counter(w.get("host") for w in self._workers().values()))
        else:
            threads = self.threads_per_worker
        futures = [
            self.client.submit(_dask_task, payload, token, comp, threads, pure=False,
                               key=f"mdakit-fastrdf-{token}-{i}", resources=self.resources)
            for i, comp in enumerate(computations)
        ]
        bar = self._progress_bar(sum(len(c) for c in computations))
        sizes = {f.key: len(c) for f, c in zip(futures, computations)}
        try:
            for fut in as_completed(futures):
                if fut.status == "error":
                    fut.result()  # raises the worker's exception with its traceback
                if bar is not None:
                    bar.update(sizes[fut.key])
            return [f.result() for f in futures]
        finally:
            if bar is not None:
                bar.close()
            self.client.cancel(futures + [payload])


def _dask_task(payload, token, computation, threads):
    if isinstance(threads, dict):  # 'auto': {host: worker processes on it}
        try:
            from distributed import get_worker

            w = get_worker()
            host = w.address.split("://")[-1].rsplit(":", 1)[0]
            share = threads.get(host, 1) * max(1, int(w.state.nthreads))
        except Exception:  # noqa: BLE001  # pragma: no cover - not on a dask worker
            share = 1
        threads = max(1, available_cpus() // share)
    return _dask_part(payload, token, computation, threads)
