"""The worker process of the node backend, and the helpers every backend worker process uses
(its own progress-bar locks, death with its parent)."""

from __future__ import annotations

import gc
import os
import pickle
import signal
import threading
import time
import traceback

from ..engine import (
    WorkerPlacement,
    cuda,
    set_worker_placement,
)
from .base import _analysis_of, _PartResult
from .feed import RUN_OVER, FeedClient, keep_rings, mapped_ring, read_frames
from .frames import CancelFlags, PartCancelled, current_part, set_frame_source
from .messages import (
    Cancelled,
    Done,
    End,
    Ended,
    Exit,
    Failed,
    Hello,
    Ready,
    Stop,
)
from .payload import last_load
from .payload import loads as payload_loads
from .payload import read as payload_read
from .planning import WorkerSpec
from .trace import mark


def _die_with_parent():
    """Ask Linux to kill this worker when the process that started it dies."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001, S110  # pragma: no cover - not Linux / no libc
        pass


_private_lock_pid = None


def _private_progress_lock():
    """Give this worker process progress-bar locks of its own (once per process).

    tqdm, under MDAnalysis's ``ProgressBar``, guards its bars with a lock holding a
    multiprocessing semaphore that is created once and inherited by forked processes, and
    every part a worker computes creates and closes a bar (hidden or not). A worker killed
    inside that short critical section (by the node backend when it stops a straggler's
    duplicate or the other workers of a failed run, by the OOM killer, by a user) would
    leave the semaphore taken for ever, and the next progress bar of the process that
    called ``run()`` would wait on it for ever. A worker therefore never touches the shared
    one; its own bars do not need to be coordinated with other processes.
    """
    global _private_lock_pid
    pid = os.getpid()
    if _private_lock_pid == pid:
        return
    from MDAnalysis.lib.log import ProgressBar
    from tqdm import tqdm

    lock = threading.RLock()
    tqdm.set_lock(lock)
    ProgressBar.set_lock(lock)
    # any other bar class that made a lock of its own before the fork (tqdm.auto, ...)
    todo = list(tqdm.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "_lock" in vars(cls):
            cls.set_lock(lock)
    _private_lock_pid = pid


def _worker_main(conn, spec: WorkerSpec, payload: bytes | None, pin: bool, parent_pid: int,
                 feed=None, cancel=None, gen=0, pooled=False):
    """A node backend worker: compute the parts the parent sends on `conn` with the
    pickled analysis `payload` (None: ask the parent for it on `conn`, as a worker that did
    not fork does) until the parent says stop.

    `feed`: None (the worker reads its frames), ``(ring spec, task queue, filled queue,
    frames issued by the parent, lookahead)`` for a worker fed by readers (:mod:`.feed`),
    or ``('reader', task queue, {rank: ring spec}, {rank: filled queue})`` for a reader.
    `cancel`: :meth:`.CancelFlags.spec` of the run's cancel flags: a part whose flag is
    set stops at its next frame and is reported as ``("cancelled", idx, seconds, wait)``.

    `pooled` (a warm engine, ``with NodeBackend() as node``): at the end of a run
    (:class:`~.messages.End`) the worker answers :class:`~.messages.Ended` and waits
    for the next run,
    ``("run", payload file, feed, cancel, gen)`` with the feed's queues left out (the ones
    it started with serve every run), until :class:`~.messages.Exit`. `gen` numbers the
    runs. The messages are those of :mod:`.messages`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it stops us on Ctrl-C
    _die_with_parent()
    # The caller died before prctl? A forked or spawned worker is the caller's child; one
    # from a fork server is the server's child (the server dies with the caller, and this
    # worker with the server), so there ask whether the caller still exists.
    if spec.start_method == "forkserver":
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # pragma: no cover - exists, owned by another user
            pass
    elif os.getppid() != parent_pid:
        os._exit(1)
    state = {"idx": None}
    mark("entry", spec.kind, rank=spec.rank, start_method=spec.start_method)
    try:
        if pin and spec.cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, spec.cpus)
        if spec.idle:
            _idle_priority()
        device = _own_gpu(spec)
        set_worker_placement(WorkerPlacement(
            device=device, n_threads=spec.n_threads, rank=spec.rank,
            kind=spec.kind, bound_device=spec.device))
        if spec.kind == "gpu" and device == "cuda:0":
            # the driver starts while the payload comes and is unpickled (engine/cuda.py)
            cuda.start_cuda_early()
        _private_progress_lock()
        if payload is None:  # not forked: the parent sends it once we are running
            conn.send(Hello(spec.rank))
            payload = conn.recv_bytes()
            mark("payload", spec.kind, rank=spec.rank)
        if feed is not None and feed[0] == "reader":
            _, tasks, ring_specs, filled = feed
            queues = (tasks, filled)
            pending, over = _reader_run(conn, spec, payload, queues, ring_specs, gen, None)
            del payload
            while pooled and (pending is not None or over):
                # the next run: the one of the task it took (whose message came before
                # its tasks), or, after a run that ended before it started, the next one
                if pending is None:
                    gc.collect()  # idle between runs (as a compute worker, below)
                while True:
                    msg = conn.recv()
                    if isinstance(msg, Exit):
                        return
                    path, ring_specs, gen = msg.payload_file, msg.feed, msg.gen
                    if pending is None or gen >= pending[0]:
                        break
                    # a run in which it got no task (over by now): its files are gone
                    conn.send(Ready(spec.rank, _ready_info(gen)))
                try:
                    payload = payload_read(path)
                except FileNotFoundError:  # that run is over too
                    pending, over = None, True
                    continue
                pending, over = _reader_run(conn, spec, payload, queues, ring_specs, gen,
                                            pending)
                del payload
            return
        queues = light = None
        if feed is not None:
            ring, tasks, filled, preissued, lookahead = feed
            queues, light = (tasks, filled), (ring, preissued, lookahead)
        ended = _compute_run(conn, spec, payload, queues, light, cancel, gen, state)
        del payload
        while pooled and ended:
            # Between runs of a warm engine: the last run's analysis (its Universe, a web
            # of cycles) is collected now, while the worker waits, rather than by a
            # collection that a later run's allocations trigger on its critical path
            gc.collect()
            msg = conn.recv()
            if isinstance(msg, Exit):
                return
            path, light, cancel, gen = msg
            payload = payload_read(path)
            ended = _compute_run(conn, spec, payload, queues, light, cancel, gen, state)
            del payload
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent has gone or closed our pipe
    except BaseException as exc:  # noqa: BLE001 - everything goes to the parent
        tb = traceback.format_exc()
        try:
            blob = pickle.dumps(exc)
            pickle.loads(blob)
        except Exception:  # noqa: BLE001 - not picklable: the parent gets its text
            blob = None
        try:
            conn.send(Failed(state["idx"], f"{type(exc).__module__}.{type(exc).__qualname__}",
                             str(exc), tb, blob))
        except Exception:  # noqa: BLE001, S110 - the parent has gone; it sees us end
            pass
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001, S110 - closing anyway
            pass


#: the device a GPU worker's engine reports ('cuda:0', its only visible GPU) -> the GPU
#: of the node it is (``WorkerSpec.device``)
_device_alias: dict = {}


def _idle_priority():
    """This process at idle priority (Linux ``SCHED_IDLE``, which any user may choose):
    it runs only on cycles the readers that share its CPUs leave. Set before the
    kernel's threads start: they inherit it. Elsewhere the lowest nice value."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        try:
            os.nice(19)
        except (AttributeError, OSError):
            pass


def _own_gpu(spec: WorkerSpec):
    """The device this worker's engine uses. A GPU worker sees only its own GPU
    (``CUDA_VISIBLE_DEVICES`` set before anything in the process initialises CUDA), as
    ``cuda:0``: the driver then initialises one device, not every GPU of the node, and a
    context is never made on another worker's GPU. Measured on 2x H200: a lone GPU
    worker's CUDA start fell from 0.61 to 0.28-0.45 s; two starting at once still take
    ~0.7 s (benchmarks/NOTES.md, 2026-11-28)."""
    dev = spec.engine_device
    if spec.kind != "gpu" or not dev or not dev.startswith("cuda:"):
        return dev
    k = int(dev.split(":")[1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(k)
    else:
        entries = [e.strip() for e in visible.split(",")]
        if k >= len(entries) or not entries[k] or entries[k].startswith("-"):
            return dev  # (not a GPU CUDA would list: the engine says so)
        os.environ["CUDA_VISIBLE_DEVICES"] = entries[k]
    _device_alias["cuda:0"] = spec.device
    return "cuda:0"


def _ready_info(gen):
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return {"pid": os.getpid(), "cpus": cpus, "gen": gen}


def _reader_run(conn, spec, payload, queues, ring_specs, gen, first):
    """One run of a reader: ``(the first task of a later run or None at the end, False)``,
    or ``(None, True)`` when the run was over before the reader had mapped its rings (a
    warm engine's reader still starting when a short run ended: the run's files are
    gone; it waits for the next run)."""
    tasks, filled = queues
    func = payload_loads(payload)
    mark("unpickled", "reader", rank=spec.rank, gen=gen, **last_load)
    # A reader maps the rings before it says ready: once every process of the run has, the
    # parent removes the rings' files (the mappings stay), so that nothing is left in
    # /dev/shm whatever ends the run.
    try:
        keep_rings({r[0] for r in ring_specs.values()})
        rings = {rank: mapped_ring(r) for rank, r in ring_specs.items()}
    except FileNotFoundError:
        if first is not None:  # (it holds a task of this run: the run is not over)
            raise
        return None, True
    conn.send(Ready(spec.rank, _ready_info(gen)))
    got = read_frames(_analysis_of(func), tasks, rings, filled, gen, first)
    if got is RUN_OVER:  # (the rings and the analysis go as this returns)
        return None, True
    return got, False


def _compute_run(conn, spec, payload, queues, feed, cancel, gen, state):
    """One run of a compute worker: True when the parent ended it (:class:`End`, a warm
    engine), False when it said stop."""
    func = payload_loads(payload)
    mark("unpickled", spec.kind, rank=spec.rank, gen=gen, **last_load)
    client = None
    keep_rings({feed[0][0]} if feed is not None else ())
    if feed is not None:
        ring, preissued, lookahead = feed
        tasks, filled = queues
        client = FeedClient(spec.rank, ring, tasks, filled, conn, preissued, lookahead, gen)
    flags = CancelFlags(*cancel) if cancel is not None else None
    mark("client", spec.kind, rank=spec.rank)
    conn.send(Ready(spec.rank, _ready_info(gen)))
    if client is not None:
        set_frame_source(client)
        if spec.kind == "gpu":  # its CUDA context while the readers read the first frames
            _analysis_of(func)._warm_up()
            mark("warm", spec.kind, rank=spec.rank, cuda_start=cuda.cuda_start_span[:])
    while True:
        msg = conn.recv() if client is None else client.next_message()
        if isinstance(msg, Stop):
            return False
        if isinstance(msg, End):
            # the ring stays mapped (keep_rings): the next run may reuse it, which saves
            # freeing ~1 GB (1M atoms) and faulting it in again: 0.15-0.19 s of a warm
            # run on 2x H200 (benchmarks/NOTES.md, 2026-11-28)
            conn.send(Ended(spec.rank, client.drained if client is not None else True))
            set_frame_source(None)
            return True
        idx, computation = msg.idx, msg.frames
        state["idx"] = idx
        t0 = time.perf_counter()
        mark("part", spec.kind, rank=spec.rank, part=idx, frames=len(computation))
        current_part(flags, idx) if flags is not None else current_part()
        try:
            obj = func(computation)
        except PartCancelled:
            wait_s = client.take_wait() if client is not None else 0.0
            conn.send(Cancelled(idx, time.perf_counter() - t0, wait_s))
            state["idx"] = None
            continue
        finally:
            current_part()
        # the device the part really ran on (the engine's, once it has run a frame)
        used = getattr(getattr(obj, "_engine", None), "device_used", None)
        used = _device_alias.get(used, used)
        wait_s = client.take_wait() if client is not None else 0.0
        mark("part_end", spec.kind, rank=spec.rank, part=idx, wait=wait_s)
        conn.send(Done(idx, _PartResult(obj), time.perf_counter() - t0, used, wait_s))
        state["idx"] = None
