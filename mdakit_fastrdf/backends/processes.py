"""The node backend's processes as its parent sees them: a run's workers and readers
(:class:`_Worker`), how they are ended (:func:`shutdown`, :func:`reap_ended`) and the
processes a warm engine keeps between runs (:class:`_Pool`)."""

from __future__ import annotations

import atexit
import time
from dataclasses import dataclass, field

from .messages import End, Ended, Exit, Failed, Stop
from .planning import WorkerSpec

__all__ = ["reap_ended", "shutdown"]


@dataclass
class _Worker:
    """A process of a run (compute worker or reader), as the parent sees it; which parts it
    holds and its rates are the scheduler's (:class:`~.scheduler.WorkerState`)."""

    spec: WorkerSpec
    proc: object
    conn: object
    status: str = "starting"  # starting, idle, busy, stopped, ended
    part: int | None = None  # the part it computes, for the message of a death
    pid: int | None = None
    cpus: list = field(default_factory=list)
    devices_used: set = field(default_factory=set)
    unsent: list = field(default_factory=list)  # parts to send once the payload is sent
    has_payload: bool = False
    mapped: bool = False  # it said ready in this run (mapped the run's files)
    drained: bool = True  # (a warm engine's worker) no reading of its ring outstanding
    feed_wait_s: float = 0.0

    def reset(self):
        """A warm engine's process, at the start of its next run."""
        self.status, self.part, self.mapped, self.has_payload = "starting", None, False, True
        self.unsent, self.feed_wait_s, self.devices_used = [], 0.0, set()
        self.drained = True


def shutdown(workers, graceful, wait=True):
    """End `workers`: told to stop (`graceful`, idle ones) or terminated. Those ended
    are waited for (then killed after 5 s), in this thread; with ``wait=False`` they
    are terminated and left to :func:`reap_ended`, which the next run (and the
    interpreter's exit) calls without blocking. No thread reaps them: a thread alive
    in the parent when it forks the next run's processes deadlocked a forked child
    under the sanitizers' allocator (benchmarks/NOTES.md)."""
    stopped = []
    for w in workers:
        if w.proc.exitcode is not None:
            continue
        if graceful and w.status in ("idle", "starting") and w.status != "busy":
            try:
                w.conn.send(Stop())
                if w.status == "idle":  # (one still starting is waited for)
                    stopped.append(w)
                w.status = "stopped"
                continue
            except (OSError, ValueError):
                pass
        w.proc.terminate()
    # A worker that has run and is told to stop has handed back all it computed: it may
    # end (a GPU worker releases its CUDA context, ~0.1 s) after the run returns;
    # multiprocessing reaps it. Every other worker is ended and waited for.
    ended = [w.proc for w in workers if w not in stopped]
    for w in workers:
        try:
            w.conn.close()
        except Exception:  # noqa: BLE001, S110 - closing anyway
            pass
        w.status = "ended"
    if wait:
        _reap(ended)
    else:
        _ended_unreaped.extend((p, time.monotonic()) for p in ended)


#: processes terminated without being waited for (a cold run's readers): (process, when)
_ended_unreaped: list = []


def reap_ended(kill_after=5.0):
    """Reap the processes :func:`shutdown` terminated without waiting (a cold
    run's readers: tearing down 28 processes, each with its Universe and a mapping of
    the run's rings, took 0.10-0.16 s of every cold run's end on 2x H200). Never blocks:
    those that have exited are reaped (``exitcode`` polls ``waitpid`` with ``WNOHANG``);
    one still there `kill_after` seconds after its SIGTERM gets SIGKILL."""
    now = time.monotonic()
    keep = []
    for p, when in _ended_unreaped:
        if p.exitcode is None:
            if now - when > kill_after:
                p.kill()
            keep.append((p, when))
    _ended_unreaped[:] = keep


def _reap_at_exit():
    procs = [p for p, _ in _ended_unreaped]
    _ended_unreaped.clear()
    _reap(procs, timeout=2.0)


atexit.register(_reap_at_exit)


def _reap(procs, timeout=5.0):
    """Wait for terminated processes `procs` (at most `timeout` s in all), then kill and
    wait for those still there."""
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.exitcode is None:
            p.kill()
            p.join(1.0)


class _Pool:
    """The processes a warm engine (``with NodeBackend() as node:``) keeps between runs:
    compute workers with their engines (a GPU worker's CUDA context), readers, and the
    feed's queues they were started with. A run whose plan differs (another device, an
    analysis without readers) replaces them."""

    def __init__(self):
        self.key, self.procs, self.tasks, self.filled, self.gen = None, {}, None, {}, 0
        # the last run's rings, when the next may reuse them (RunFeed.make)
        self.rings = {}

    @property
    def workers(self):
        return list(self.procs.values())

    def fits(self, specs):
        return self.key is None or self.key == tuple(specs)

    def live(self):
        return {r: w for r, w in self.procs.items() if w.proc.exitcode is None}

    def next_gen(self):
        self.gen += 1
        return self.gen

    def adopt(self, specs, workers, tasks, filled):
        self.key = tuple(specs)
        self.procs = {w.spec.rank: w for w in workers}
        self.tasks, self.filled = tasks, filled

    def forget(self, workers):
        for w in workers:
            if self.procs.get(w.spec.rank) is w:
                del self.procs[w.spec.rank]
        if workers:
            self.rings = {}  # a process goes: the next run's rings are new
        if not self.procs:
            self.key, self.tasks, self.filled = None, None, {}

    @staticmethod
    def _await_ended(w, deadline):
        """Read `w`'s messages until its :class:`Ended` (then idle, with its `drained`) or
        `deadline` (time.monotonic()); messages of the run that is over are dropped. One
        that does not answer in time, whose pipe breaks or that reports a failure (an error
        of a copy that did not count) is marked gone."""
        while True:
            left = deadline - time.monotonic()
            try:
                if not w.conn.poll(max(0.0, left)):  # (at the deadline: what has come)
                    raise OSError
                msg = w.conn.recv()
            except (OSError, EOFError):
                w.status = "gone"
                return
            if isinstance(msg, Ended):
                w.status, w.drained = "idle", msg.drained
                return
            if isinstance(msg, Failed):
                w.status = "gone"
                return

    def take_ended(self, w):
        """Forget process `w`, which ended between runs; the :class:`Failed` it left, if
        any (None: it was killed, and the run replaces it)."""
        w.proc.join(1.0)
        msg = None
        try:
            while w.conn.poll():
                msg = w.conn.recv()
                if isinstance(msg, Failed):
                    break
        except (OSError, EOFError):
            pass
        self.forget([w])
        return msg if isinstance(msg, Failed) else None

    def end_run(self, workers):
        """Tell idle compute workers the run is over; wait (briefly) for their answer, so
        that nothing of this run is left in their pipes. One that does not answer is
        ended."""
        deadline = time.monotonic() + 5.0
        for w in workers:
            try:
                w.conn.send(End())
            except OSError:
                w.status = "gone"
        for w in workers:
            if w.status != "gone":
                self._await_ended(w, deadline)
        gone = [w for w in workers if w.status == "gone"]
        shutdown(gone, graceful=False)
        self.forget(gone)

    def end_later(self, workers):
        """Tell workers still computing a cancelled copy that the run is over; they answer
        :class:`Ended` once the copy stops (at its next frame), which :meth:`settle`
        collects. One the message cannot reach is ended now."""
        gone = []
        for w in workers:
            try:
                w.conn.send(End())
                w.status = "ending"
            except (OSError, ValueError):
                w.status = "gone"
                gone.append(w)
        shutdown(gone, graceful=False)
        self.forget(gone)

    def settle(self, timeout):
        """Wait up to `timeout` seconds in all for the answers of the workers told by
        :meth:`end_later`; the messages of their cancelled copies are dropped. One that
        has not answered by then (still in a long frame) or has ended is ended and
        forgotten: the run starting now replaces it."""
        ending = [w for w in self.procs.values() if w.status == "ending"]
        if not ending:
            return
        deadline = time.monotonic() + timeout
        for w in ending:
            self._await_ended(w, deadline)
        gone = [w for w in ending if w.status == "gone"]
        shutdown(gone, graceful=False)
        self.forget(gone)

    def close(self):
        """End every process: readers at once (they wait on their task queue and hold
        nothing), compute workers told to exit (a GPU worker releases its context)."""
        procs = self.workers
        readers = [w for w in procs if w.spec.kind == "reader"]
        workers = [w for w in procs if w.spec.kind != "reader"]
        shutdown(readers, graceful=False)
        for w in workers:
            try:
                w.conn.send(Exit())
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 2.0
        for w in workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
        shutdown([w for w in procs if w.proc.exitcode is None], graceful=False)
        for w in procs:
            try:
                w.conn.close()
            except OSError:
                pass
        for q in ([self.tasks] if self.tasks is not None else []) + list(self.filled.values()):
            q.close()
            q.cancel_join_thread()
        self.procs = {}
        self.forget([])
