"""A node run's feed (parent side): one ring of frame slots per compute worker, the
readers' task queue, each worker's queue of filled slots, and the readings issued before
the processes start (:mod:`.feed` is the processes' side)."""

from __future__ import annotations

import math

from .feed import Ring, ring_directory
from .messages import Reading, RunOver

__all__ = ["RunFeed", "feed_sizes"]

#: Bytes of frame slots per fed worker (at most; see NodeBackend, Readers)
FEED_RING_BYTES = 1 << 30
#: Frame slots of a CPU worker beside GPU workers (it reads one frame ahead of the one it
#: computes: the readers' share goes to the GPU workers)
SLOW_RING_SLOTS = 3


def feed_sizes(specs, n_readers, n_frames, slot_bytes):
    """``({rank: slots of its ring}, {rank: frames it reads ahead})`` of the compute
    workers `specs` fed by `n_readers` readers over a run of `n_frames` frames.

    The readers read for the fast workers: the GPU workers when there are any (a CPU worker
    beside them computes a frame while they compute a hundred: a small ring, and no share
    of the readers; sized by all the workers, the GPU worker of a hybrid plan read ahead too
    little and waited for each part's first frames: 2x H200, XTC, 0.41 s against 0.02 s
    alone, benchmarks/NOTES.md). A fast worker's ring has at least one slot per reader and
    two more, and up to :data:`FEED_RING_BYTES`, so that the readers read ahead while a GPU
    worker starts (imports, CUDA: ~1 s), but no more than its share of the frames. A fed
    worker asks for its next part when fewer frames than its lookahead are known ahead:
    twice its share of the readers, so that every reader has a frame."""
    fast = [s for s in specs if s.kind == "gpu"] or list(specs)
    share = math.ceil(n_frames / len(fast)) + 1
    n_slots = max(3, math.ceil(n_readers / len(fast)) + 2,
                  min(FEED_RING_BYTES // slot_bytes, share, 1024))
    ahead = min(n_slots, 2 * math.ceil(n_readers / len(fast)) + 2)
    slots = {s.rank: n_slots if s in fast else SLOW_RING_SLOTS for s in specs}
    lookahead = {s.rank: ahead if s in fast else SLOW_RING_SLOTS - 1 for s in specs}
    return slots, lookahead


class RunFeed:
    """The feed of one node run; empty (``rings`` ``{}``) for a run without readers."""

    def __init__(self):
        self.rings, self.filled, self.tasks, self.preissue = {}, {}, None, []
        self.lookahead = {}  # rank -> frames a fed worker reads ahead
        self.reused = False  # the rings of a warm engine's last run

    def make(self, mp, specs, n_readers, n_frames, n_rows, pool, all_live=False):
        """The rings and queues of compute workers `specs` with `n_readers` readers (a warm
        engine's queues, or new ones of the spawn context, which serve forked and spawned
        processes alike).

        A warm engine whose processes all served the last run reuses that run's rings when
        they are large enough (same rows per frame, as many slots or more): its processes
        kept their mappings, so nothing is freed, created or faulted in again (~0.15 s a
        GB). The last run must have ended with every process having mapped them and no
        reading outstanding (``_Pool.rings``)."""
        slot_bytes = 12 * n_rows + 256
        slots, self.lookahead = feed_sizes(specs, n_readers, n_frames, slot_bytes)
        where = ring_directory(sum(slots.values()) * slot_bytes)
        if pool is not None and pool.tasks is not None:
            self.tasks, self.filled = pool.tasks, pool.filled
        else:
            qctx = mp.get_context("spawn")
            self.tasks = qctx.Queue()
            self.filled = {spec.rank: qctx.Queue() for spec in specs}
        kept = pool.rings if pool is not None and all_live else {}
        if kept and all(s.rank in kept and kept[s.rank].n_rows == n_rows
                        and kept[s.rank].n_slots >= slots[s.rank] for s in specs):
            self.rings = {s.rank: kept[s.rank] for s in specs}
            self.reused = True
            return
        if pool is not None:
            pool.rings = {}  # (their processes unmap them as this run starts)
        for spec in specs:
            # the parent only names the file: it does not keep it mapped, so that the
            # last process to unmap a ring (which frees its ~1 GB) is a worker or reader
            # between runs or after its end, not the parent before run() returns
            ring = self.rings[spec.rank] = Ring.new(slots[spec.rank], n_rows, where)
            ring.close()

    def reader_feed(self):
        """``(feed, feed without its queues)`` of a reader process."""
        light = {r: g.spec() for r, g in self.rings.items()}
        return ("reader", self.tasks, light, self.filled), light

    def worker_feed(self, rank, frames, gen):
        """``(feed, feed without its queues)`` of compute worker `rank` whose first parts
        hold `frames`: their first readings are issued (:meth:`start_readings`) so that the
        readers start on them while the worker starts (a GPU worker: imports, CUDA)."""
        ring = self.rings[rank]
        pre = frames[: ring.n_slots]
        self.preissue.extend(Reading(gen, rank, pos % ring.n_slots, pos, frame)
                             for pos, frame in enumerate(pre))
        ahead = self.lookahead[rank]
        return ((ring.spec(), self.tasks, self.filled[rank], len(pre), ahead),
                (ring.spec(), len(pre), ahead))

    def start_readings(self):
        """The readings issued before the processes started, in turn: each worker's first
        frame, then each one's second, ... (the readers' first round serves every worker).
        The first put starts the queue's feeder thread: no fork after it."""
        for task in sorted(self.preissue, key=lambda t: (t.position, t.rank)):
            self.tasks.put(task)

    def unlink(self):
        """The rings' files go once every process has mapped them (the mappings stay)."""
        for ring in self.rings.values():
            ring.unlink()

    def run_over(self, n_readers, gen):
        """Tell a warm engine's readers that run `gen` is over (each unmaps the run's rings
        while it waits for the next)."""
        if self.tasks is not None:
            for _ in range(n_readers):
                self.tasks.put(RunOver(gen))

    def close(self, keep_queues):
        """Close and unlink the rings (what processes still map stays until they unmap
        it); the queues too unless a warm engine keeps them (`keep_queues`)."""
        for ring in self.rings.values():
            ring.close(unlink=True)
        if not keep_queues:
            for q in ([self.tasks] if self.tasks is not None else []) + list(self.filled.values()):
                q.close()
                q.cancel_join_thread()
