"""Readers apart from compute workers: the node backend's feed.

A GPU computes the histogram of a frame in a few milliseconds, while decoding the frame
from a compressed trajectory takes tens to hundreds (1M atoms of XTC: ~90 ms on one core).
A GPU worker that reads its own frames is therefore busy a few percent of the time. With a
feed, *reader* processes (each with its own copy of the analysis and so its own open
trajectory) decode frames in parallel and write each frame's rows (the atoms the analysis
needs, already gathered, or its centres), frame index, time, box and volume into a slot of
the compute worker's ring; the compute worker runs the analysis's ordinary frame loop on
them, without touching the trajectory.

Protocol (no coordinates are pickled; all messages are a few integers):

* The parent creates one :class:`Ring` per fed compute worker: a file in ``/dev/shm``
  (another temporary directory when it lacks room) of ``n_slots`` slots, mapped by the
  worker and by every reader before they say ready; then the parent removes the files (the
  mappings stay), so nothing is left behind however the run ends.
* A compute worker knows its frames from the parts the parent sends it (it receives the
  next part while it computes the current one). The parent gives a fed worker its first
  parts as it starts it, and the readers the first ``n_slots`` of their frames, so that
  reading overlaps the worker's start (a GPU worker: imports, the CUDA context). Its
  :class:`FeedClient` numbers the frames it will compute, ``position`` 0, 1, 2, ..., and
  puts a :class:`~.messages.Reading` ``(run, rank, slot, position, frame)`` on the readers'
  common task queue for each, at most ``n_slots`` ahead of the frame it computes; the slot
  of position ``p`` is ``p % n_slots``, free because the worker has finished position
  ``p - n_slots`` before it issues ``p``. So readers never wait for a slot, and a worker
  never waits on anything but the frame it needs next. When fewer frames than its
  lookahead are left to issue, it asks the parent for its next part (:class:`~.messages.More`).
* A reader takes a task, reads the frame (``trajectory[frame]``), writes the slot (the rows
  gathered and, for analyses whose kernels take them wrapped into the box, wrapped: the
  same operations on the same values as in the worker, so the same bits) and puts
  ``(run, position)`` on the worker's queue. The queue's message (a pipe write) orders the
  slot's contents before the notice on every architecture. Readings and notices of an
  earlier run (a warm engine serves several) are skipped.
* The worker consumes positions in order and checks each slot's frame index; a cancelled
  part's readings already issued are awaited and their slots released
  (:meth:`FeedClient.skip`).

Results are those of the same parts computed by workers that read their own frames: the
same frames, in the same order, in the same parts.
"""

from __future__ import annotations

import collections
import math
import os
import queue
import tempfile
import time
import uuid

import numpy as np

from .frames import FedTimestep, MappedFile, PartCancelled, check_cancelled
from .messages import More, Part, Reading, RunOver
from .trace import mark

__all__ = ["FeedClient", "Ring", "ring_directory"]

#: float64 header of a slot: position, frame, time, has_box, dimensions (6), volume, the
#: kind of the box the kernels use when the reader prepared the rows (-1: not prepared)
_META = 12
_ALIGN = 64


def ring_directory(nbytes: int) -> str:
    """Where rings of `nbytes` in all go: ``/dev/shm`` (memory) when it has room for them,
    else the temporary directory (a file the page cache keeps in memory as long as it can;
    containers often give ``/dev/shm`` only 64 MB)."""
    for d in ("/dev/shm", tempfile.gettempdir()):
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize > 1.25 * nbytes + (64 << 20):
            return d
    return tempfile.gettempdir()


class Ring(MappedFile):
    """``n_slots`` frames of ``n_rows`` float32 rows each, in a file mapped by the compute
    worker that owns it and by the readers."""

    def __init__(self, path: str, n_slots: int, n_rows: int, *, create: bool = False):
        self.path, self.n_slots, self.n_rows = path, int(n_slots), int(n_rows)
        rows_bytes = 12 * self.n_rows
        self.slot_bytes = _ALIGN * math.ceil((8 * _META + rows_bytes) / _ALIGN)
        size = self.slot_bytes * self.n_slots
        if create:
            with open(path, "wb") as f:
                f.truncate(size)
        self._map = np.memmap(path, dtype=np.uint8, mode="r+", shape=(size,))
        self._meta = [self._map[s * self.slot_bytes: s * self.slot_bytes + 8 * _META]
                      .view(np.float64) for s in range(self.n_slots)]
        self._rows = [self._map[s * self.slot_bytes + 8 * _META:
                                s * self.slot_bytes + 8 * _META + rows_bytes]
                      .view(np.float32).reshape(self.n_rows, 3) for s in range(self.n_slots)]
        self._track()

    @classmethod
    def new(cls, n_slots, n_rows, directory=None):
        directory = directory or tempfile.gettempdir()
        path = os.path.join(directory, f"mdakit-fastrdf-feed-{os.getpid()}-{uuid.uuid4().hex}")
        return cls(path, n_slots, n_rows, create=True)

    @property
    def nbytes(self):
        return self.slot_bytes * self.n_slots

    def spec(self):
        """What another process needs to map this ring."""
        return (self.path, self.n_slots, self.n_rows)

    def rows(self, slot):
        return self._rows[slot]

    def write_meta(self, slot, position, ts, kind=None):
        m = self._meta[slot]
        m[11] = -1 if kind is None else kind
        dims = ts.dimensions
        m[0], m[1], m[2] = position, ts.frame, ts.time
        if dims is None:
            m[3] = 0.0
            m[4:10] = np.nan
        else:
            m[3] = 1.0
            m[4:10] = dims
        m[10] = ts.volume

    def prepared_kind(self, slot):
        """The kind of box the kernels use if the reader prepared the rows, else None."""
        k = self._meta[slot][11]
        return None if k < 0 else int(k)

    def timestep(self, slot):
        """(position, the frame's :class:`~.frames.FedTimestep`, with the slot's rows) of a
        written slot."""
        m = self._meta[slot]
        dims = np.array(m[4:10], dtype=np.float32) if m[3] else None
        return int(m[0]), FedTimestep(int(m[1]), float(m[2]), dims, np.float64(m[10]),
                                      self._rows[slot], self.prepared_kind(slot))

    def _release(self):
        self._meta = self._rows = None
        self._map = None


#: rings this process has mapped, by path: a warm engine's workers and readers keep them
#: from one run to the next (:func:`mapped_ring`, :func:`keep_rings`)
_kept_rings: dict = {}


def mapped_ring(spec) -> Ring:
    """The ring `spec` (:meth:`Ring.spec`), mapped by this process: the mapping it already
    has of that file (a warm engine's run that reuses its rings, whose files are gone by
    then), or a new one."""
    path, n_slots, n_rows = spec
    r = _kept_rings.get(path)
    if r is None or r._map is None or (r.n_slots, r.n_rows) != (int(n_slots), int(n_rows)):
        r = _kept_rings[path] = Ring(path, n_slots, n_rows)
    return r


def keep_rings(paths) -> None:
    """Unmap this process's rings other than `paths` (a run's processes call it as the run
    starts: rings of earlier runs that this one does not reuse go)."""
    for path in [p for p in _kept_rings if p not in paths]:
        _kept_rings.pop(path).close()


class _FedFrames:
    """The frames of one part, as its compute worker receives them from the readers."""

    def __init__(self, client, frames):
        self._client = client
        self.frames = tuple(int(f) for f in frames)

    def __len__(self):
        return len(self.frames)

    def __iter__(self):
        client = self._client
        for k, frame in enumerate(self.frames):
            try:
                check_cancelled()
            except PartCancelled:
                client.skip(self.frames[k:])  # (the readings already issued arrive)
                raise
            w0 = client.wait_s
            ts = client.next_frame(frame)
            mark("frame", "fed", frame=frame, wait=client.wait_s - w0)
            try:
                yield ts
            finally:
                ts.rows = None  # (the slot is read again)
                client.release()
                mark("frame_end", "fed", frame=frame)


class FeedClient:
    """A compute worker's side of the feed: issues the reading of its frames and hands
    them to the analysis's frame loop in order.

    Parameters
    ----------
    rank : int
        The worker's rank (the readers' key to its ring and queue).
    ring : tuple
        :meth:`Ring.spec` of the worker's ring.
    tasks, filled : multiprocessing queues
        The readers' task queue, and this worker's queue of written positions.
    conn : Connection
        The worker's pipe to the parent: parts that arrive while the worker computes are
        kept (and their frames issued) for :meth:`next_message`.
    """

    def __init__(self, rank, ring, tasks, filled, conn, preissued=0, lookahead=0, gen=0):
        self.rank = rank
        self.ring = mapped_ring(ring)
        self.tasks, self.filled, self.conn = tasks, filled, conn
        tasks.cancel_join_thread()  # readings still queued at the end of the run are dropped
        self.stash = collections.deque()   # parent messages received while computing
        self.unissued = collections.deque()  # frames of known parts not yet given to readers
        self.issued = collections.deque()    # (position, frame) given to readers, in order
        self.next_position = 0
        self.arrived = set()
        self._current = None                 # the slot the analysis holds
        self.preissued = int(preissued)      # first frames the parent gave the readers
        self.wait_s = 0.0                    # time spent waiting for the readers
        # frames known ahead under which the worker asks the parent for its next part
        # ("more"), so that the readers read across the end of a part; 0: never asks
        self.lookahead = int(lookahead)
        self.asked = False
        # the run (a warm engine's workers and readers serve several): readings and
        # notices of another run are not this one's
        self.gen = int(gen)

    # -- messages from the parent ---------------------------------------------------
    def _take(self, msg):
        if isinstance(msg, Part):
            self.asked = False
            for f in np.asarray(msg.frames)[:, 1]:
                if self.preissued:  # the parent issued it while this worker started
                    self.issued.append((self.next_position, int(f)))
                    self.next_position += 1
                    self.preissued -= 1
                else:
                    self.unissued.append(int(f))
            self._issue()
        return msg

    def take_wait(self):
        """Seconds spent waiting for the readers since the last call."""
        w, self.wait_s = self.wait_s, 0.0
        return w

    def poll(self):
        """Keep the parts the parent sent meanwhile (their frames are issued at once)."""
        while self.conn.poll():
            self.stash.append(self._take(self.conn.recv()))

    def next_message(self):
        """The next message from the parent (kept ones first)."""
        if self.stash:
            return self.stash.popleft()
        return self._take(self.conn.recv())

    # -- frames ---------------------------------------------------------------------
    def frames(self, analysis, slicer):
        """The frames `slicer` of a part, for `analysis`'s frame loop (the frame-source
        interface of :func:`~.frames.frame_source`; the rows come on each timestep)."""
        return _FedFrames(self, slicer)

    def _issue(self):
        n = self.ring.n_slots
        while self.unissued and len(self.issued) < n:
            frame = self.unissued.popleft()
            pos = self.next_position
            self.next_position += 1
            self.issued.append((pos, frame))
            self.tasks.put(Reading(self.gen, self.rank, pos % n, pos, frame))
        if (self.lookahead and not self.asked
                and len(self.issued) + len(self.unissued) < self.lookahead):
            self.asked = True
            self.conn.send(More(self.rank))

    def skip(self, frames):
        """Drop the remaining `frames` of a cancelled part: the ones not yet given to the
        readers are forgotten, the others are awaited and their slots released."""
        frames = [int(f) for f in frames]
        # the part's frames come next: the first m of the issued ones, then unissued ones
        m = min(len(frames), len(self.issued))
        if [f for _, f in list(self.issued)[:m]] != frames[:m]:
            raise RuntimeError("feed: the frames to skip are not the next ones issued")
        for f in frames[m:]:
            if not self.unissued or self.unissued[0] != f:
                raise RuntimeError(f"feed: cannot skip frame {f}: it is not the next one")
            self.unissued.popleft()
        for _ in range(m):
            pos = self.issued[0][0]
            self._await(pos)
            self.arrived.discard(pos)
            self.issued.popleft()
            self._issue()

    def _await(self, pos):
        if pos not in self.arrived:
            t0 = time.perf_counter()
            while pos not in self.arrived:
                try:
                    gen, got = self.filled.get(timeout=1.0)
                    if gen == self.gen:
                        self.arrived.add(got)
                except queue.Empty:
                    self.poll()  # keep taking the parent's parts while the readers work
            self.wait_s += time.perf_counter() - t0

    def next_frame(self, frame):
        """The :class:`~.frames.FedTimestep` of the next position (with its rows), which
        must be `frame`."""
        self.poll()
        self._issue()
        if not self.issued:
            raise RuntimeError(f"feed: frame {frame} was never given to the readers")
        pos, want = self.issued[0]
        if want != frame:
            raise RuntimeError(f"feed: the next frame read is {want}, the analysis wants {frame}")
        self._await(pos)
        self.arrived.discard(pos)
        slot = pos % self.ring.n_slots
        got, ts = self.ring.timestep(slot)
        if got != pos or ts.frame != frame:
            raise RuntimeError(f"feed: slot {slot} holds position {got} frame {ts.frame}, "
                               f"expected position {pos} frame {frame}")
        self._current = slot
        return ts

    @property
    def drained(self) -> bool:
        """No reading of this worker's ring is outstanding: every one it issued (the
        parent's first ones included) has been taken."""
        return not self.issued and self._current is None

    def release(self):
        """The analysis is done with the current slot: issue the next reading into it."""
        if self._current is not None:
            self.issued.popleft()
            self._current = None
            self._issue()


#: what :func:`read_frames` returns at this run's :class:`~.messages.RunOver`
RUN_OVER = "run over"


def read_frames(analysis, tasks, rings, filled, gen=0, first=None):
    """A reader's loop: frames from `tasks` into the compute workers' rings.

    ``rings``: ``{rank: Ring}`` (mapped); ``filled``: ``{rank: queue}``. Tasks are
    :class:`~.messages.Reading`; those of an earlier run are skipped. Returns
    None at a None task (the end), :data:`RUN_OVER` at this run's
    :class:`~.messages.RunOver` (a warm engine's run is over: the reader drops its rings
    and waits for the next run), or the first task of a later run (a warm engine's
    reader then takes that run's analysis and rings, and goes on with the task).
    `first`: a task of this run already taken off the queue."""
    n_rows = analysis._prepare_reader()
    for q in filled.values():
        q.cancel_join_thread()  # the parent ends readers when the run is done
    for rank, ring in rings.items():
        if ring.n_rows != n_rows:
            raise RuntimeError(f"feed: worker {rank}'s ring has {ring.n_rows} rows per frame, "
                               f"this reader's analysis {n_rows}")
    trajectory = analysis._trajectory
    while True:
        task, first = (first, None) if first is not None else (tasks.get(), None)
        if task is None:
            return None
        if task.gen != gen:
            if task.gen < gen:
                continue  # a reading of an earlier run: nobody waits for it
            return task
        if isinstance(task, RunOver):
            return RUN_OVER
        _, rank, slot, pos, frame = task
        ring = rings[rank]
        try:
            t0 = time.perf_counter()
            ts = trajectory[frame]
            kind = analysis._read_frame(ts, ring.rows(slot))
            mark("read", "reader", frame=frame, secs=time.perf_counter() - t0)
        except Exception as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"(a reader of the node backend, reading frame {frame} for "
                             f"worker {rank})")
            raise
        ring.write_meta(slot, pos, ts, kind)
        filled[rank].put((gen, pos))
