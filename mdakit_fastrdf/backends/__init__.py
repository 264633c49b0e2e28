r"""Parallel backends over frames: every GPU and every socket of a node, and dask clusters.

The analysis classes of this package accept, in :meth:`run`, MDAnalysis's own backends
(``'serial'``, ``'multiprocessing'``, ``'dask'``) and two more:

``backend='node'`` (:class:`NodeBackend`)
    One persistent worker process per GPU, bound to its device, and CPU workers placed on
    the sockets / NUMA nodes with their cores (a core is left to each GPU worker, as
    CADISHI does). Frames are cut into many small parts that the workers take from a queue
    as they become free, so a fast GPU worker takes more frames than a CPU worker; near the
    end, an idle fast worker also recomputes a part a much slower worker is still busy
    with, and the first copy to finish counts (the counts are the same either way). Worker
    processes, their CUDA contexts and device buffers live for the whole run.
``backend='dask'`` with a :class:`dask.distributed.Client`
    MDAnalysis's dask backend always starts a local process pool; here, when a distributed
    client is active (or with ``backend=DaskDistributedBackend(client)``), the parts run
    on the client's workers (:class:`DaskDistributedBackend`), on one node or many.

Every backend gives the same integer counts: partial histograms are sums of integers.

Failure behaviour of the node backend: an exception in a worker stops the run at once and
is raised in the caller (the original exception, with the worker's traceback as its
``__cause__``); a worker that dies (killed, out of memory, crashed) ends the run with a
:class:`WorkerDiedError` naming the worker, its signal and its frames; Ctrl-C stops every
worker. No partial result is ever returned.

The code lives in modules by job: ``errors`` (the errors), ``base`` (what the backends
share), ``planning`` (the workers of a node run), ``worker`` (the node backend's worker
process), ``node`` (:class:`NodeBackend`), ``dask_backend`` (:class:`DaskDistributedBackend`),
``mixin`` (:class:`ParallelAnalysisMixin`, used by the analyses) and ``topology`` (the
node's CPUs and GPUs). Import the names from here.
"""

from __future__ import annotations

from .base import _OwnBackend as _OwnBackend
from .base import _PartResult as _PartResult
from .dask_backend import DaskDistributedBackend
from .dask_backend import _default_client as _default_client
from .errors import RemoteTraceback as RemoteTraceback
from .errors import WorkerDiedError, WorkerError
from .mixin import ParallelAnalysisMixin
from .mixin import _resolve_backend as _resolve_backend
from .node import NodeBackend
from .planning import WorkerSpec, plan_workers
from .worker import _private_progress_lock as _private_progress_lock

__all__ = [
    "DaskDistributedBackend",
    "NodeBackend",
    "ParallelAnalysisMixin",
    "WorkerDiedError",
    "WorkerError",
    "WorkerSpec",
    "plan_workers",
]
