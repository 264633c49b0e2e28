"""Which worker of a node computes which part, and when: the node backend's scheduler.

Pure policy: no processes, pipes or clock (times are passed in), so that the same code
drives the node backend's workers (:mod:`.node`) and its simulation with stand-in workers
of given rates (:mod:`.simulate`).

The rules (docs/design.rst, "The node engine's scheduler"):

* **Parts shrink towards the end** (:func:`guided_sizes`): each part is a fixed fraction of
  the frames not yet cut, so the first parts are long (one synchronisation of the device
  and one message per part) and the last ones short, so that the workers finish together.
* **A fast worker takes the next part in order.** A worker fed by readers holds the parts
  its ring needs to read ahead across the end of a part: it asks for one more
  (:meth:`Scheduler.on_more`) once every frame it knows of has been handed to the readers.
* **A slow worker beside fast ones** (a CPU worker beside GPU workers) takes a part only
  when it will finish it before the fast workers would finish all the rest without it, at
  the rates measured so far in the run. It waits for the GPU workers' first rate; its
  own first part, before it has a rate, is the shortest one open to it, and only while
  the GPU workers have more than :data:`PROBE_S` seconds of frames left. The last
  ``2 G`` parts (G GPU workers) are never open to it: they balance the GPUs' end. While
  GPU workers fed by readers wait for their frames (:data:`STARVED`), it takes none: the
  readers are the limit, and its cycles are theirs.
* **No worker holds back the end.** Once no part is left, an idle worker with a measured
  rate recomputes (duplicates) the part whose owner is predicted to finish it last, when
  it would finish it :data:`HEDGE` times sooner. The first copy to finish counts; every
  other copy is cancelled (:meth:`Scheduler.on_done` says which), and the run never
  waits for a cancelled copy.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field

__all__ = ["HEDGE", "Scheduler", "guided_sizes"]

#: A part is duplicated when its owner would finish it more than HEDGE times later than
#: the idle worker could (plus :data:`MARGIN_S`).
HEDGE = 1.5
MARGIN_S = 0.05
#: A CPU worker beside GPU workers takes its first part (its rate unknown) only while the
#: GPU workers have at least PROBE_S seconds of frames left: that first part costs the
#: readers beside it (caches, memory bandwidth, even at idle priority) for its length, and
#: only a run long enough can win it back. Measured on 2x H200, 600 frames of 1M atoms of
#: XTC (one GPU, ~4 s): probes of 2-3 frames of ~0.65 s each raised the GPU's waits for
#: frames from 0.21 to 0.62 s, 0.90x the GPU alone; at 2,400 frames the same probes gave
#: 1.02x (benchmarks/NOTES.md, 2026-11-28, third session).
PROBE_S = 5.0
#: A CPU worker beside GPU workers fed by readers takes no part while those GPU workers
#: have waited for frames (beyond each one's first wait) more than STARVED of their busy
#: time: the readers are then the limit, and a CPU worker's cycles, even at idle priority
#: (its own frames' decoding, the caches and memory bandwidth it shares), cost the GPUs
#: frames. Measured on 2x H200, 1M atoms of XTC: GPU workers waiting 11-24 % of their time,
#: two CPU workers of one frame each made the run 7 % slower (benchmarks/NOTES.md).
STARVED = 0.05


def guided_sizes(n_frames: int, n_workers: int, *, divisor: int = 2, min_size: int = 1,
                 max_size: int | None = None) -> list:
    """Part sizes that shrink towards the end (guided self-scheduling).

    Each part takes ``ceil(left / (divisor * n_workers))`` of the ``left`` frames not yet
    cut, at least `min_size` and at most `max_size`: with ``W`` workers about
    ``divisor * W * ln(n_frames / (divisor * W))`` parts, the last ones of `min_size`
    frames.

    >>> guided_sizes(20, 2)
    [5, 4, 3, 2, 2, 1, 1, 1, 1]
    """
    if n_frames <= 0:
        return []
    n_workers = max(1, int(n_workers))
    sizes, left = [], int(n_frames)
    while left > 0:
        s = max(int(min_size), math.ceil(left / (divisor * n_workers)))
        if max_size is not None:
            s = min(s, int(max_size))
        s = min(s, left)
        sizes.append(s)
        left -= s
    return sizes


@dataclass
class WorkerState:
    """What the scheduler knows of one compute worker."""

    rank: int
    kind: str                 # 'gpu' or 'cpu'
    fed: bool = False         # fed by readers: holds parts ahead (see on_more)
    lookahead: int = 0        # frames a fed worker's ring reads ahead
    outstanding: collections.deque = field(default_factory=collections.deque)  # sent, in order
    t0: float = 0.0           # when its first outstanding part started
    ready: bool = False
    frames: int = 0           # frames of the parts it ended (finished or cancelled)
    busy_s: float = 0.0
    parts: int = 0
    duplicates: int = 0
    cancelled: int = 0
    # a fed worker: the longest it waited for the readers' first frames of a part (what a
    # duplicate, whose frames are read anew, costs before its first frame)
    feed_latency_s: float = 0.0
    wait_s: float = 0.0       # a fed worker: of busy_s, the seconds it waited for frames

    def rate(self):
        """Frames per second measured so far (None before its first part ended)."""
        return self.frames / self.busy_s if self.busy_s > 0 and self.frames > 0 else None

    def compute_rate(self):
        """Frames per second of its own work: a fed worker's waits for the readers left
        out (its first part's wait for the first frames would otherwise put the end of
        parts whose frames are already read far too late); otherwise :meth:`rate`."""
        work = self.busy_s - self.wait_s
        if not self.fed or self.frames <= 0 or work <= 0.05 * self.busy_s:
            return self.rate()
        return self.frames / work


class Scheduler:
    """Parts of ``sizes`` frames over workers given as :class:`WorkerState` objects.

    The caller sends the parts the methods return (in the order returned) to the worker
    named, and reports each part's end with :meth:`on_done` or :meth:`on_cancelled` (in
    the order the worker ran them).
    """

    def __init__(self, sizes, workers, *, hedge: float = HEDGE):
        self.sizes = [int(s) for s in sizes]
        self.workers = {w.rank: w for w in workers}
        self.pending = collections.deque(range(len(self.sizes)))
        self.done = [False] * len(self.sizes)
        self.owners = collections.defaultdict(set)
        self.n_done = 0
        self.hedge = float(hedge)
        kinds = {w.kind for w in workers}
        self.mixed = "gpu" in kinds and "cpu" in kinds
        self.stats = {"duplicates_started": 0, "duplicates_won": 0, "cancelled": 0,
                      "cpu_parts_declined": 0}
        self._dups = set()

    @property
    def finished(self) -> bool:
        return self.n_done == len(self.sizes)

    # -- events ---------------------------------------------------------------------
    def initial(self, rank, now=0.0) -> list:
        """Parts for a fed worker as it starts (before it is ready), so that the readers
        read its first frames while it starts: enough to fill its ring, and no more than
        its share of the run's frames (a short run: the first worker asked would
        otherwise take most of them, and the readers would read its frames first)."""
        w = self.workers[rank]
        out = []
        if not w.fed or (self.mixed and w.kind == "cpu"):
            return out
        n_fed = sum(o.fed and not (self.mixed and o.kind == "cpu")
                    for o in self.workers.values())
        share = math.ceil(sum(self.sizes) / max(1, n_fed))
        want = min(max(1, w.lookahead), share)
        have = sum(self.sizes[i] for i in w.outstanding)
        while self.pending and have < want:
            nxt = self.sizes[self.pending[0]]
            if have and have + nxt > share:
                break
            out.append(self._give(w, self.pending.popleft(), now))
            have += nxt
        return out

    def on_ready(self, rank, now) -> list:
        w = self.workers[rank]
        w.ready = True
        if w.outstanding:
            w.t0 = now  # (its first parts were given as it started)
            return []
        return self._next(w, now)

    def on_done(self, rank, idx, busy_s, now, wait_s=0.0):
        """Worker `rank` finished part `idx` in `busy_s` seconds. Returns ``(won, cancel,
        send)``: whether its copy counts (the first to finish), the parts whose other
        copies are to be cancelled (``[idx]`` or ``[]``), and the parts to send it next.
        `wait_s`: the seconds a fed worker waited for the readers during the part (its
        longest such wait delays any duplicate it would take)."""
        w = self._end(rank, idx, busy_s, now)
        if w.fed:
            w.feed_latency_s = max(w.feed_latency_s, float(wait_s))
            w.wait_s += min(float(wait_s), float(busy_s))
        won = not self.done[idx]
        cancel = []
        if won:
            self.done[idx] = True
            self.n_done += 1
            if (rank, idx) in self._dups:
                self.stats["duplicates_won"] += 1
            if len(self.owners[idx]) > 1:
                cancel = [idx]
        return won, cancel, ([] if self.finished else self._next(w, now))

    def on_cancelled(self, rank, idx, busy_s, now) -> list:
        """Worker `rank` stopped its copy of part `idx` (another copy won); parts to send."""
        w = self._end(rank, idx, busy_s, now, cancelled=True)
        self.stats["cancelled"] += 1
        return [] if self.finished else self._next(w, now)

    def on_more(self, rank, now) -> list:
        """A fed worker has handed the readers every frame it knows of: its next part, if
        one is left for it."""
        w = self.workers[rank]
        if not self.pending or not w.outstanding:
            return []
        idx = self._take_pending(w, now, queued=True)
        return [] if idx is None else [self._give(w, idx, now)]

    def idle(self, now) -> list:
        """``[(rank, idx), ...]``: parts for ready workers that have none (a duplicate may
        have become worth starting as time passed)."""
        out = []
        if self.finished:
            return out
        for w in self.workers.values():
            if w.ready and not w.outstanding:
                out.extend((w.rank, i) for i in self._next(w, now))
        return out

    # -- predictions ----------------------------------------------------------------
    def readers_limit(self) -> bool:
        """Whether the GPU workers fed by readers have waited for frames, beyond each
        one's longest single wait (its first frames), more than :data:`STARVED` of their
        busy time so far."""
        fed = [w for w in self.workers.values() if w.kind == "gpu" and w.fed and w.busy_s > 0]
        waits = sum(max(0.0, w.wait_s - w.feed_latency_s) for w in fed)
        return bool(fed) and waits > STARVED * sum(w.busy_s for w in fed)

    def finish_times(self, w, now) -> dict:
        """``{idx: predicted end}`` of the parts `w` holds, at its measured rate of work
        (:meth:`WorkerState.compute_rate`; a worker without one: its first part is assumed
        half done)."""
        out, t = {}, now
        rate = w.compute_rate()
        for k, idx in enumerate(w.outstanding):
            size = self.sizes[idx]
            if k == 0:
                elapsed = max(0.0, now - w.t0)
                t = w.t0 + (size / rate if rate else 2.0 * elapsed)
                t = max(t, now)
            else:
                t = t + (size / rate if rate else math.inf)
            out[idx] = t
        return out

    def _fast_rate(self):
        rates = [w.rate() for w in self.workers.values() if w.kind == "gpu"]
        known = [r for r in rates if r]
        # GPU workers without a rate yet count at the mean of the others
        return sum(known) * len(rates) / len(known) if known else None

    def _fast_left(self, now):
        """Frames the GPU workers still have (held and pending), less the elapsed share of
        the parts they compute."""
        left = sum(self.sizes[i] for i in self.pending)
        for w in self.workers.values():
            if w.kind != "gpu":
                continue
            rate = w.rate()
            for k, idx in enumerate(w.outstanding):
                if self.done[idx]:
                    continue
                size = self.sizes[idx]
                if k == 0 and rate:
                    size = max(0.0, size - rate * max(0.0, now - w.t0))
                left += size
        return left

    # -- choices --------------------------------------------------------------------
    def _take_pending(self, w, now, queued=False):
        """The pending part `w` should take now, or None (taken off the queue)."""
        if not self.pending:
            return None
        if not (self.mixed and w.kind == "cpu"):
            return self.pending.popleft()
        # a CPU worker beside GPU workers: only a part it finishes before the GPUs would
        # finish the rest without it
        rate, fast = w.rate(), self._fast_rate()
        # the last parts (the shortest) balance the end among the GPU workers: not for CPUs
        n_fast = sum(o.kind == "gpu" for o in self.workers.values())
        open_parts = list(self.pending)[: max(0, len(self.pending) - 2 * n_fast)]
        if not open_parts:
            self.stats["cpu_parts_declined"] += 1
            return None
        smallest = min(open_parts, key=lambda i: (self.sizes[i], -i))
        if fast is None:
            return None  # the GPU workers' rates first: they decide what is worth taking
        if self.readers_limit():
            self.stats["cpu_parts_declined"] += 1
            return None
        if rate is None:
            if queued or w.parts or w.outstanding:
                return None
            if self._fast_left(now) / fast < PROBE_S:
                self.stats["cpu_parts_declined"] += 1
                return None  # too little left for a first part of unknown length
            self.pending.remove(smallest)  # its first part: the smallest left
            return smallest
        start = max(now, self.finish_times(w, now).get(w.outstanding[-1], now)
                    if w.outstanding else now)
        left = self._fast_left(now)
        best = None
        for idx in open_parts:
            size = self.sizes[idx]
            # (with the margin of a duplicate: a part finished just in time would be
            # duplicated by an idle GPU worker)
            in_time = start + self.hedge * size / rate + MARGIN_S <= now + (left - size) / fast
            if in_time and (best is None or size > self.sizes[best]):
                best = idx
        if best is None:
            self.stats["cpu_parts_declined"] += 1
            return None
        self.pending.remove(best)
        return best

    def _next(self, w, now) -> list:
        if not w.ready or self.finished:
            return []
        if w.outstanding:
            return []
        idx = self._take_pending(w, now)
        if idx is not None:
            return [self._give(w, idx, now)]
        if self.pending:
            return []
        idx = self._duplicate(w, now)
        if idx is None:
            return []
        self.stats["duplicates_started"] += 1
        w.duplicates += 1
        self._dups.add((w.rank, idx))
        return [self._give(w, idx, now)]

    def _duplicate(self, w, now):
        rate = w.rate()
        if rate is None:
            return None
        best, latest = None, 0.0
        for o in self.workers.values():
            if o is w or not o.outstanding:
                continue
            for idx, t_end in self.finish_times(o, now).items():
                if self.done[idx] or len(self.owners[idx]) > 1:
                    continue
                # (a fed worker's copy waits for its frames to be read first: at the end
                # of a short XTC run of 1M atoms ~0.1-0.2 s, more than the owner needed)
                mine = (now + self.hedge * self.sizes[idx] / rate + MARGIN_S
                        + (w.feed_latency_s if w.fed else 0.0))
                if t_end > mine and t_end > latest:
                    best, latest = idx, t_end
        return best

    # -- bookkeeping ----------------------------------------------------------------
    def _give(self, w, idx, now):
        if not w.outstanding:
            w.t0 = now
        w.outstanding.append(idx)
        self.owners[idx].add(w.rank)
        return idx

    def _end(self, rank, idx, busy_s, now, cancelled=False):
        w = self.workers[rank]
        if not w.outstanding or w.outstanding[0] != idx:
            raise RuntimeError(f"scheduler: worker {rank} ended part {idx}, but holds "
                               f"{list(w.outstanding)}")
        w.outstanding.popleft()
        w.t0 = now
        if not cancelled:
            w.frames += self.sizes[idx]
            w.busy_s += float(busy_s)
            w.parts += 1
        else:
            w.cancelled += 1
        return w
