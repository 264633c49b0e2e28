"""The frames a backend worker hands an analysis, and the cancellation of a part.

An analysis's frame loop in a worker process iterates one of these instead of MDAnalysis's
sliced trajectory: :class:`WorkerFrames` (the worker reads its frames) or the feed's
frames (:mod:`.feed`: readers decoded them; each comes as a :class:`FedTimestep` with
its rows). Both check between frames whether the part they belong to has been cancelled
(another worker's copy of it finished first: :mod:`.scheduler`) and then raise
:class:`PartCancelled`, which the worker reports instead of a result.

Cancellation goes through :class:`CancelFlags`, one byte per part in a small file mapped
by the parent and by every worker of the run (no message to wait for: the parent sets the
byte, the worker sees it at its next frame).
"""

from __future__ import annotations

import os
import tempfile
import uuid
import weakref

import numpy as np

__all__ = ["CancelFlags", "FedTimestep", "PartCancelled", "WorkerFrames", "check_cancelled",
           "current_part", "frame_source", "set_frame_source"]


class PartCancelled(Exception):
    """The part being computed was cancelled: another worker's copy of it counts."""


#: the mapped files of this process, with the pid that mapped them
_mapped: weakref.WeakSet = weakref.WeakSet()


def _drop_inherited():
    """In a child just forked: unmap the files its parent had mapped (a ring, ~1 GB for
    1M atoms). A forked worker or reader maps the ones it uses itself from their specs;
    without this, a warm engine's forked processes kept the first run's rings for the
    engine's life."""
    pid = os.getpid()
    for m in list(_mapped):
        if m._pid != pid:
            m._release()


os.register_at_fork(after_in_child=_drop_inherited)


class MappedFile:
    """A file in /dev/shm (or the temporary directory) that every process of a run maps;
    the parent removes it once all have mapped it (the mappings stay)."""

    path: str

    def _track(self):
        self._pid = os.getpid()
        _mapped.add(self)

    def unlink(self):
        """Remove the file (every process that maps it keeps its mapping)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self, unlink=False):
        self._release()
        if unlink:
            self.unlink()

    def _release(self):
        self._map = None


class CancelFlags(MappedFile):
    """One byte per part of a run (1: cancelled), in a file every process of the run maps.

    The parent creates it (:meth:`new`), workers map it from :meth:`spec`; once every
    process has mapped it the parent removes the file (:meth:`unlink`), the mappings stay.
    """

    def __init__(self, path: str, n: int, *, create: bool = False):
        self.path, self.n = path, int(n)
        if create:
            with open(path, "wb") as f:
                f.truncate(max(1, self.n))
        self._map = np.memmap(path, dtype=np.uint8, mode="r+", shape=(max(1, self.n),))
        self._track()

    @classmethod
    def new(cls, n, directory=None):
        directory = directory or tempfile.gettempdir()
        path = os.path.join(directory, f"mdakit-fastrdf-cancel-{os.getpid()}-{uuid.uuid4().hex}")
        return cls(path, n, create=True)

    def spec(self):
        return (self.path, self.n)

    def cancel(self, idx):
        self._map[idx] = 1

    def __getitem__(self, idx):
        return bool(self._map[idx])


#: (CancelFlags, part index) of the part this worker process computes, or None
_current = None


def current_part(flags=None, idx=None):
    """Set (in a worker, around each part) the part whose cancellation the frame sources
    check; ``current_part()`` clears it."""
    global _current
    _current = None if flags is None else (flags, int(idx))


def check_cancelled():
    """Raise :class:`PartCancelled` if the current part was cancelled."""
    cur = _current
    if cur is not None and cur[0][cur[1]]:
        raise PartCancelled(f"part {cur[1]} was cancelled")


#: the frame source of this worker process's runs (a fed worker's :class:`.FeedClient`)
_source = None


def set_frame_source(source):
    """Set (in a worker fed by readers, for its run) the object whose ``frames(analysis,
    frames)`` the analyses' frame loops iterate; None: they read their own frames."""
    global _source
    _source = source


def frame_source():
    """The frame source a worker set (:func:`set_frame_source`), or None."""
    return _source


class WorkerFrames:
    """The frames of one part, read in order without MDAnalysis's closing rewind.

    MDAnalysis's frame iterators read frame 0 again when they end (``rewind``), which in a
    worker process is one wasted frame read per part. The user's Universe is not in the
    worker, so its position there does not matter.
    """

    def __init__(self, trajectory, frames):
        self._trajectory = trajectory
        self.frames = tuple(int(f) for f in frames)

    def __len__(self):
        return len(self.frames)

    def __iter__(self):
        for frame in self.frames:
            check_cancelled()
            yield self._trajectory[frame]


class FedTimestep:
    """What a compute worker fed by readers (:mod:`~mdakit_fastrdf.backends.feed`) knows of
    a frame: its index, time, box and volume as the reader's Timestep had them, and the
    frame's `rows` (a view of the reader's slot, valid until the loop moves on) with
    `box_kind`, the kind of the box the kernels use when the reader prepared the rows
    (None: not prepared). It has no positions."""

    __slots__ = ("box_kind", "dimensions", "frame", "rows", "time", "volume")

    def __init__(self, frame, time, dimensions, volume, rows=None, box_kind=None):
        self.frame, self.time, self.dimensions, self.volume = frame, time, dimensions, volume
        self.rows, self.box_kind = rows, box_kind

    @property
    def positions(self):
        raise RuntimeError("a fed frame has no positions: its rows come from a reader")
