"""One run of the node backend (parent side): starts the planned workers and readers (or
takes those of a warm engine), feeds them, hands them the parts the scheduler chooses,
cancels the losing copy of a recomputed part and ends the run."""

from __future__ import annotations

import os
import time

from . import payload
from .base import _analysis_of, _quiet
from .feed import ring_directory
from .frames import CancelFlags
from .main_guard import main_guard_error, unguarded_main_call
from .messages import HANDLERS, Part, Run
from .processes import _Worker, shutdown
from .scheduler import Scheduler, WorkerState
from .trace import mark
from .run_feed import RunFeed
from .worker import _worker_main

#: seconds a warm engine's next run waits for a worker that was still busy with a
#: cancelled copy when the last run ended (:meth:`_Pool.settle`); one that has not stopped
#: by then is ended and replaced (a new GPU worker costs ~0.5-0.8 s: its CUDA start)
SETTLE_S = 0.5


def _poll(conn):
    """Whether `conn` has a message (False once it is closed)."""
    try:
        return conn.poll()
    except (OSError, EOFError):
        return False


class _NodeRun:
    """One run of a :class:`NodeBackend`: its processes, their messages and the scheduler.

    Each message a worker sends has a method (``on_hello``, ``on_ready``, ``on_done``,
    ``on_cancelled``, ``on_more``, ``on_error``); which part goes where is the
    :class:`~.scheduler.Scheduler`'s choice.
    """

    def __init__(self, backend, func, computations, payload_bytes=None):
        import multiprocessing as mp

        self.backend, self.func, self.computations = backend, func, computations
        self.mp = mp
        n = len(computations)
        self.sizes = [len(c) for c in computations]
        self.results = [None] * n
        self.ok = False
        analysis = _analysis_of(func)
        self.analysis = analysis
        plan = backend.plan_for(analysis)
        self.reader_specs = [s for s in plan if s.kind == "reader"]
        self.specs = [s for s in plan if s.kind != "reader"][:n]
        # a worker that does not fork imports the main script again: not if that reruns this
        methods = sorted({s.start_method for s in self.specs + self.reader_specs} - {"fork"})
        where = unguarded_main_call() if methods else None
        if where is not None:
            raise main_guard_error(where, methods, any(s.kind == "gpu" for s in self.specs))
        # (its Universes apart: a warm engine's processes keep theirs, payload.py)
        self.payload = (payload.Payload([payload_bytes]) if payload_bytes is not None
                        else payload.dump(_quiet(func), _analysis_of(func)))
        # A forked worker inherits the payload; the others get it through their pipe once
        # they say "hello": Python writes a spawned process's arguments to it before the
        # child reads them, and would wait for ever on one that died while starting.
        self.to_send = 0
        self.feed = RunFeed()
        self.all_mapped = self.rings_kept = False
        self.flags = None
        self.workers: list[_Worker] = []
        self.readers: list[_Worker] = []
        self.by_rank = {}
        self.t_start = time.perf_counter()
        self.bar = backend._progress_bar(sum(self.sizes))
        self.timeline = {"first_ready_s": None, "first_part_s": None, "parts_done_s": []}
        self.sched = None
        self.payload_file = None

    # -- start ---------------------------------------------------------------------------
    def start(self):
        """The run's processes: a warm engine's, or new ones; the readers' first frames."""
        specs, reader_specs = self.specs, self.reader_specs
        pool = self.backend._pool
        if pool is not None:
            pool.settle(SETTLE_S)  # workers the last run left stopping a cancelled copy
        if pool is not None and not pool.fits(specs + reader_specs):
            pool.close()  # another plan (device, readers): new processes
        live = pool.live() if pool is not None else {}
        for w in list(pool.procs.values()) if pool is not None else []:
            if w.spec.rank not in live:  # ended between runs: its error, or a new one
                self.replace(w, pool)
        self.gen = pool.next_gen() if pool is not None else 0
        if reader_specs:
            self.feed.make(self.mp, specs, len(reader_specs), sum(self.sizes),
                           self.analysis._feed_rows(), pool,
                           all(s.rank in live for s in specs + reader_specs))
        self.flags = CancelFlags.new(len(self.computations),
                                     ring_directory(len(self.computations)))
        states = [WorkerState(s.rank, "gpu" if s.kind == "gpu" else "cpu",
                              fed=bool(self.feed.rings),
                              lookahead=self.feed.lookahead.get(s.rank, 0))
                  for s in specs]
        self.sched = Scheduler(self.sizes, states)
        now = time.perf_counter()
        if live:
            # a warm engine: the same processes take this run's analysis from a file
            self.payload_file = os.path.join(ring_directory(len(self.payload)),
                                             f"mdakit-fastrdf-run-{os.getpid()}-{self.gen}")
            self.payload.write(self.payload_file)
        for spec in specs + reader_specs:
            first, feed, light = self._feed_of(spec, now)
            w = live.get(spec.rank)
            if w is not None:
                w.reset()
                try:
                    w.conn.send(Run(self.payload_file, light, self.flags.spec(), self.gen))
                except OSError:
                    w = self.replace(w, pool)
            if w is None:
                w = self._launch(spec, feed, pooled=pool is not None)
            (self.readers if spec.kind == "reader" else self.workers).append(w)
            self.by_rank[spec.rank] = w
            if first:
                w.status = "busy"
                w.unsent = [Part(idx, self.computations[idx]) for idx in first]
                if w.has_payload:
                    self.send_unsent(w)
        if pool is not None:
            pool.adopt(specs + reader_specs, self.workers + self.readers, self.feed.tasks,
                       self.feed.filled)
        # the readers' first frames, once every process is started
        self.feed.start_readings()
        if not self.to_send:
            self.payload = None

    def _feed_of(self, spec, now):
        """``(first parts, feed, feed without its queues)`` of a process: a fed worker gets
        its first parts now, and the readers start on their frames while it starts."""
        if spec.kind == "reader":
            return ([], *self.feed.reader_feed())
        if not self.feed.rings:
            return [], None, None
        first = self.sched.initial(spec.rank, now)
        frames = [int(f) for i in first for f in self.computations[i][:, 1]]
        return (first, *self.feed.worker_feed(spec.rank, frames, self.gen))

    def _launch(self, spec, feed, pooled):
        """A new process for `spec` (forked ones inherit the pickled analysis; the others
        ask for it with Hello)."""
        ctx = self.mp.get_context(spec.start_method)
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        inherit = spec.start_method == "fork"
        self.to_send += not inherit
        proc = ctx.Process(target=_worker_main, name=f"mdakit-fastrdf-{spec.rank}",
                           args=(child_conn, spec, self.payload.joined() if inherit else None,
                                 self.backend.pin, os.getpid(), feed, self.flags.spec(),
                                 self.gen, pooled),
                           daemon=True)
        proc.start()
        child_conn.close()
        return _Worker(spec, proc, parent_conn, has_payload=inherit)

    def replace(self, w, pool):
        """A warm engine's process that ended between runs: the error it left, if any, is
        raised; one that left none (killed) is replaced by a new process (None)."""
        failed = pool.take_ended(w)
        if failed is not None:
            self.backend._raise_remote(w, failed, self.computations)

    # -- the loop ------------------------------------------------------------------------
    def loop(self):
        from multiprocessing.connection import wait

        sched = self.sched
        while not sched.finished:
            live = [w for w in self.workers if w.status not in ("stopped", "ended")]
            idle = any(w.status == "idle" for w in live)
            procs = live + self.readers
            ready = wait([w.conn for w in procs] + [w.proc.sentinel for w in procs],
                         timeout=0.05 if idle else 1.0)
            now = time.perf_counter()
            for w in procs:
                if w.conn not in ready and w.proc.sentinel not in ready:
                    continue
                while not sched.finished and _poll(w.conn):
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):  # its end of the pipe closed
                        self.died(w)
                    handler = getattr(self, HANDLERS.get(type(msg), ""), None)
                    if handler is None:
                        raise RuntimeError(f"node backend: unexpected message {msg!r}")
                    handler(w, msg, now)
                if (w.proc.sentinel in ready and not sched.finished
                        and not _poll(w.conn)):
                    self.died(w)
            for rank, idx in sched.idle(now):
                self.send(self.by_rank[rank], [idx])
            for w in self.workers:
                if w.status in ("idle", "busy"):
                    w.status = "busy" if sched.workers[w.spec.rank].outstanding else "idle"

    # -- messages ------------------------------------------------------------------------
    def on_hello(self, w, msg, now):
        """A process that did not fork: its payload, then the parts it was given."""
        try:
            w.conn.send_bytes(self.payload.joined())
        except OSError:  # it died since
            self.died(w)
        w.has_payload = True
        self.to_send -= 1
        if not self.to_send:
            self.payload = None
        self.send_unsent(w)

    def on_ready(self, w, msg, now):
        if msg.info.get("gen", self.gen) != self.gen:
            return  # a reader of a warm engine that had no task in an earlier run
        w.pid, w.cpus, w.mapped = msg.info["pid"], msg.info["cpus"], True
        self.unlink_when_mapped()
        if w.spec.kind == "reader":
            w.status = "reading"
            return
        mark("ready", "parent", rank=w.spec.rank)
        if self.timeline["first_ready_s"] is None:
            self.timeline["first_ready_s"] = now - self.t_start
        if w.status == "starting":
            w.status = "idle"
        self.send(w, self.sched.on_ready(w.spec.rank, now))

    def on_done(self, w, msg, now):
        idx, res, secs, used, wait_s = msg
        w.feed_wait_s += wait_s
        mark("done", "parent", rank=w.spec.rank, part=idx, secs=secs)
        self.timeline["parts_done_s"].append(round(now - self.t_start, 4))
        # when the workers began computing (a GPU worker: after its CUDA context)
        start = round(now - self.t_start - secs, 4)
        if self.timeline["first_part_s"] is None or start < self.timeline["first_part_s"]:
            self.timeline["first_part_s"] = start
        if used is not None:
            w.devices_used.add(used)
        won, cancel, send = self.sched.on_done(w.spec.rank, idx, secs, now, wait_s)
        if won:
            self.results[idx] = res
            if self.bar is not None:
                self.bar.update(self.sizes[idx])
        for c in cancel:
            self.flags.cancel(c)
        self.send(w, send)

    def on_cancelled(self, w, msg, now):
        idx, secs, wait_s = msg
        w.feed_wait_s += wait_s
        self.send(w, self.sched.on_cancelled(w.spec.rank, idx, secs, now))

    def on_more(self, w, msg, now):
        self.send(w, self.sched.on_more(w.spec.rank, now))

    def on_error(self, w, msg, now):
        self.backend._raise_remote(w, msg, self.computations)

    # -- helpers -------------------------------------------------------------------------
    def send(self, w, parts):
        if not parts:
            return
        w.status = "busy"
        w.unsent.extend(Part(idx, self.computations[idx]) for idx in parts)
        if w.has_payload:  # (else once it has had it: on_hello)
            self.send_unsent(w)

    def send_unsent(self, w):
        try:
            for msg in w.unsent:
                w.conn.send(msg)
        except OSError:
            self.died(w)
        w.unsent = []

    def died(self, w):
        w.proc.join(2.0)
        idx = None
        st = self.sched.workers.get(w.spec.rank) if self.sched and w.spec.kind != "reader" else None
        if st is not None and st.outstanding:
            idx = st.outstanding[0]
        w.part = idx
        if w.status == "idle" and idx is not None:
            w.status = "busy"
        self.backend._raise_died(w, self.computations)

    def unlink_when_mapped(self):
        """Once every process of the run has mapped the rings and the cancel flags (it said
        ready), their files go: the mappings stay, and nothing is left behind however the
        run ends."""
        if all(x.mapped for x in self.workers + self.readers):
            self.all_mapped = True
            self.feed.unlink()
            if self.flags is not None:
                self.flags.unlink()

    # -- end -----------------------------------------------------------------------------
    def finish(self):
        b = self.backend
        pool = b._pool
        if pool is not None and self.ok:
            # a warm engine keeps its processes: idle workers end the run and wait for the
            # next; one still busy (a cancelled copy) is not waited for
            busy = [w for w in self.workers if w.status == "busy"]
            pool.end_run([w for w in self.workers if w not in busy])
            # the next run may use these rings again: every process mapped them, none is
            # replaced, and no reader still writes into one
            clean = (self.feed.rings and (self.all_mapped or self.feed.reused) and not busy
                     and all(w.status == "idle" and w.drained for w in self.workers))
            pool.rings = dict(self.feed.rings) if clean else {}
            self.rings_kept = bool(clean)
            # a worker still computing a copy whose other copy counted (its part is
            # cancelled: it stops at its next frame) is told the run is over and kept;
            # the next run collects its answer (settle) rather than this one ending it
            pool.end_later(busy)
            self.feed.run_over(len(self.readers), self.gen)
        else:
            if pool is not None:
                pool.forget(self.workers + self.readers)
            # they hold nothing: terminated first and not waited for (reap_ended)
            shutdown(self.readers, graceful=False, wait=False)
            mark("readers_ended", "parent")
            shutdown(self.workers, graceful=self.ok)
            mark("workers_ended", "parent")
        if self.payload_file:
            try:
                os.unlink(self.payload_file)
            except FileNotFoundError:
                pass
        self.feed.close(keep_queues=pool is not None and bool(pool.workers))
        if self.flags is not None:
            self.flags.close(unlink=True)
        mark("files_closed", "parent")
        if self.bar is not None:
            self.bar.close()
        states = self.sched.workers if self.sched is not None else {}
        stats = dict(self.sched.stats) if self.sched is not None else {}

        def state(w, key, default=0):
            st = states.get(w.spec.rank)
            return getattr(st, key) if st is not None else default

        return {
            "wall_s": time.perf_counter() - self.t_start,
            **self.timeline,
            "n_parts": len(self.computations),
            "part_sizes": list(self.sizes),
            "n_frames": sum(self.sizes),
            "rings_kept": self.rings_kept,  # (a warm engine's next run may write into them)
            **stats,
            "workers": [
                {"rank": w.spec.rank, "kind": w.spec.kind, "device": w.spec.device,
                 "n_threads": w.spec.n_threads, "start_method": w.spec.start_method,
                 "pid": w.pid, "process": w.proc.pid, "cpus": w.cpus,
                 "parts": state(w, "parts"),
                 "frames": state(w, "frames"), "busy_s": state(w, "busy_s", 0.0),
                 "duplicates": state(w, "duplicates"), "cancelled": state(w, "cancelled"),
                 "feed_wait_s": w.feed_wait_s, "lookahead": self.feed.lookahead.get(w.spec.rank, 0),
                 "devices_used": sorted(w.devices_used)}
                for w in self.workers],
            "readers": [{"rank": w.spec.rank, "pid": w.pid or w.proc.pid,
                         "cpus": w.cpus or list(w.spec.cpus), "mapped": w.mapped}
                        for w in self.readers],
        }
