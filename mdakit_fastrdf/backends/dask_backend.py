"""The parts of a run on the workers of a :class:`dask.distributed.Client`.

(Named ``dask_backend`` so that it is never taken for the ``dask`` package.)
"""

from __future__ import annotations

import collections
import itertools
import pickle
import threading
import uuid
import warnings

from ..engine import (
    WorkerPlacement,
    available_cpus,
    set_worker_placement,
    worker_placement,
)
from .base import _analysis_of, _OwnBackend, _PartResult, _quiet
from .payload import dumps as payload_dumps
from .payload import loads as payload_loads
from .planning import _AUTO, _check_auto_int
from .scheduler import guided_sizes

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
    engine : {'auto', 'node', 'parts'}, optional
        ``'node'``: each dask task is a block of frames run by a
        :class:`~mdakit_fastrdf.backends.NodeBackend` inside the dask worker (its readers,
        GPUs and cores: those the dask worker process may use, ``CUDA_VISIBLE_DEVICES`` and
        its CPU affinity), kept warm between tasks and runs; a cluster of N nodes then runs
        N node engines, as CADISHI runs one engine per MPI rank. ``'parts'``: each part is
        a task that the dask worker runs itself (one frame reader per dask worker).
        ``'auto'`` (default): ``'node'`` when the dask workers may start processes (not
        daemonic: ``distributed.worker.daemon`` False), else ``'parts'`` with a warning
        that says how to get node engines.
    node_options : dict, optional
        Options of each dask worker's NodeBackend (``gpus``, ``readers``, ...; not
        ``topology``: each plans for what its process may use).
    blocks_per_worker : int, optional
        Blocks of frames per dask worker with node engines (default 1: each node engine
        runs one block, as CADISHI gives each MPI rank one share of the frames; every
        block costs its node engine a run's start and end, ~0.3-0.5 s on 2x H200 with a
        1M-atom XTC). More blocks let a node that finishes early take another, for
        clusters of unequal nodes. Each block is cut into parts that shrink towards its
        end.

    Notes
    -----
    With ``engine='parts'`` each worker process unpickles the analysis once per run (and
    thread) and runs its parts on it. For GPUs start one worker process per GPU with one
    thread, each seeing its GPU as device 0 (``CUDA_VISIBLE_DEVICES``), e.g. with dask-cuda's
    ``LocalCUDACluster`` or the dask-jobqueue / dask-mpi recipes in the docs; the analysis's
    ``device='auto'`` then uses that GPU. With node engines one dask worker per node (or
    per GPU, each with its share of the cores) is the layout; see :doc:`devices`.
    """

    def __init__(self, client=None, n_workers=None, *, threads_per_worker=_AUTO,
                 parts_per_worker=4, resources=None, engine=_AUTO, node_options=None,
                 blocks_per_worker=1):
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
        if engine not in (_AUTO, "node", "parts"):
            raise ValueError(f"engine must be 'auto', 'node' or 'parts', got {engine!r}")
        if node_options is not None and not isinstance(node_options, dict):
            raise TypeError(f"node_options must be a dict of NodeBackend options, got "
                            f"{node_options!r}")
        self.node_options = dict(node_options or {})
        if "topology" in self.node_options:
            raise ValueError("node_options: each dask worker plans for its own node; "
                             "leave topology out")
        self.blocks_per_worker = _check_auto_int(
            "blocks_per_worker", blocks_per_worker, 1,
            "it is the number of node-sized blocks of frames per dask worker")
        if n_workers is None:
            n_workers = max(1, len(self._workers()))
        super().__init__(n_workers)
        self.engine = engine if engine != _AUTO else self._node_engines_possible()
        self._block_counts = None

    def _node_engines_possible(self):
        """'node' when every dask worker may start processes (a daemonic process may not:
        start the workers with ``distributed.worker.daemon: False``), else 'parts' with a
        warning that says how to get node engines."""
        try:
            daemonic = self.client.run(_worker_is_daemonic)
        except Exception:  # noqa: BLE001 - a client that cannot run on its workers
            daemonic = {None: True}
        if daemonic and not any(daemonic.values()):
            return "node"
        warnings.warn(
            "DaskDistributedBackend: the dask workers are daemonic processes, which may not "
            "start the node engine's workers and readers; each part runs in the dask "
            "worker itself instead (engine='parts'), one frame reader per dask worker. For "
            "the node engine in every dask worker start the cluster with "
            "dask.config.set({'distributed.worker.daemon': False}) (or "
            "DASK_DISTRIBUTED__WORKER__DAEMON=False), or pass engine='parts' to choose "
            "this.", RuntimeWarning, stacklevel=3)
        return "parts"

    def _workers(self):
        try:
            return self.client.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # older distributed
            return self.client.scheduler_info()["workers"]

    def parts_for(self, n_frames: int) -> int:
        return max(1, min(n_frames, self.parts_per_worker * self.n_workers))

    def part_sizes(self, n_frames: int):
        """With node engines: ``blocks_per_worker`` blocks of frames per dask worker, each
        cut into parts that shrink towards the block's end (the node engine's own cut);
        else None (``parts_per_worker`` even parts per worker)."""
        if self.engine != "node":
            self._block_counts = None
            return None
        n_blocks = max(1, min(n_frames, self.blocks_per_worker * self.n_workers))
        bounds = [round(k * n_frames / n_blocks) for k in range(n_blocks + 1)]
        gpus = self.node_options.get("gpus", 1)
        per_node = gpus if isinstance(gpus, int) and gpus > 0 else (
            len(gpus) if isinstance(gpus, (list, tuple)) and gpus else 1)
        sizes, counts = [], []
        for a, b in itertools.pairwise(bounds):
            block = guided_sizes(b - a, per_node)
            sizes += block
            counts.append(len(block))
        self._block_counts = counts
        return sizes

    def apply(self, func, computations):
        """Submit the parts to the client; return the results in order. With node engines
        one task per block of parts, run by the node engine of the dask worker that takes
        it; else one task per part."""
        computations = list(computations)
        counts = self._block_counts
        self._block_counts = None
        if (self.engine == "node" and computations and counts
                and sum(counts) == len(computations)):
            blocks, k = [], 0
            for c in counts:
                blocks.append(computations[k:k + c])
                k += c
            results = self._submit(func, blocks, _dask_node_block, self.node_options)
            return [r for block in results for r in block]
        return self._submit(func, computations, _dask_task, None)

    def _submit(self, func, items, task, node_options):
        from distributed import as_completed

        try:
            import cloudpickle as _pickler
        except ImportError:  # pragma: no cover
            _pickler = pickle
        computations = list(items)
        if not computations:
            return []
        token = uuid.uuid4().hex
        if node_options is not None:
            # node engines: the node payload (its Universes apart, payload.py), which the
            # dask worker loads with the Universes it kept from the last run and passes to
            # its node engine as it is (one Universe unpickled and one pickled less a run)
            blob = payload_dumps(_quiet(func), _analysis_of(func))
        else:
            blob = _pickler.dumps(_quiet(func))
        payload = self.client.scatter(blob, broadcast=True, hash=False)
        if self.threads_per_worker == _AUTO:
            # resolved on each worker: its cores / (worker processes on its host x its threads)
            threads = dict(collections.Counter(w.get("host") for w in self._workers().values()))
        else:
            threads = self.threads_per_worker
        extra = () if node_options is None else (node_options,)
        futures = [
            self.client.submit(task, payload, token, comp, threads, *extra, pure=False,
                               key=f"mdakit-fastrdf-{token}-{i}", resources=self.resources)
            for i, comp in enumerate(computations)
        ]
        frames = [sum(len(c) for c in comp) if node_options is not None else len(comp)
                  for comp in computations]
        bar = self._progress_bar(sum(frames))
        sizes = {f.key: n for f, n in zip(futures, frames)}
        try:
            # (the client's loop: as_completed would look for a default client otherwise)
            for fut in as_completed(futures, loop=self.client.loop):
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


def _worker_is_daemonic():
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


#: the node engine of this dask worker process, kept warm between tasks and runs
#: (its workers and readers are this process's children and die with it)
_dask_nodes: dict = {}


def _dask_node_block(payload, token, block, threads, node_options):
    """A dask task of node-engine mode: a block of parts on this worker's node engine
    (its GPUs and cores, planned from what the dask worker process may use: its CPU
    affinity and ``CUDA_VISIBLE_DEVICES``)."""
    from .node import NodeBackend

    func = payload_loads(payload)
    key = tuple(sorted((k, repr(v)) for k, v in node_options.items()))
    with _dask_lock:
        entry = _dask_nodes.get(key)
        if entry is None:
            entry = _dask_nodes[key] = (NodeBackend(**node_options).__enter__(),
                                        threading.Lock())
    node, lock = entry
    with lock:  # (a dask worker of several threads: one block at a time on its node)
        return node.apply(func, block, payload_bytes=payload)
