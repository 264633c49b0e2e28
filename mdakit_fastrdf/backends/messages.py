"""The messages between the node backend's parent process and its workers and readers.

Each is a small named tuple sent over the worker's pipe (pickled, as tuples are); the parent
has one method per message it receives (``_NodeRun.on_<name>``). Coordinates never travel
in messages: readers write them into shared-memory rings (:mod:`.feed`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Cancelled", "Done", "End", "Ended", "Exit", "Failed", "Hello", "More", "Part",
           "Reading", "Ready", "Run", "Stop"]


# -- parent -> worker ------------------------------------------------------------------
class Part(NamedTuple):
    """Compute part `idx`: the ``(n, 2)`` array of (index in the run, frame) rows."""

    idx: int
    frames: Any


class Stop(NamedTuple):
    """The run is over: end the process."""


class End(NamedTuple):
    """The run is over; a warm engine's process answers :class:`Ended` and waits for the
    next :class:`Run`."""


class Exit(NamedTuple):
    """The warm engine is closed: end the process."""


class Run(NamedTuple):
    """A warm engine's next run: the pickled analysis in `payload_file`, the feed without
    its queues (a worker: ring spec, frames issued by the parent, lookahead; a reader:
    ``{rank: ring spec}``), the cancel flags' spec and the run's number."""

    payload_file: str
    feed: Any
    cancel: Any
    gen: int


# -- worker -> parent ------------------------------------------------------------------
class Hello(NamedTuple):
    """A process that did not fork asks for the pickled analysis."""

    rank: int


class Ready(NamedTuple):
    """It has the analysis and has mapped the run's files (``info``: pid, cpus, gen)."""

    rank: int
    info: dict


class Done(NamedTuple):
    """Part `idx` computed: its result, busy seconds, the device it ran on, and the
    seconds it waited for readers."""

    idx: int
    result: Any
    seconds: float
    device: Any
    waited: float


class Cancelled(NamedTuple):
    """Its copy of part `idx` stopped: another copy counts."""

    idx: int
    seconds: float
    waited: float


class More(NamedTuple):
    """A fed worker has handed the readers every frame it knows of: its next part."""

    rank: int


class Ended(NamedTuple):
    """A warm engine's process has ended its run (the answer to :class:`End`); `drained`:
    no reading of its ring is outstanding (no reader writes into it any more), so the
    next run may use the same ring."""

    rank: int
    drained: bool = True


class Failed(NamedTuple):
    """An exception in the process (`idx`: the part, or None); `blob` the pickled
    exception when it pickles."""

    idx: Any
    type_name: str
    text: str
    traceback: str
    blob: Any


# -- worker -> reader (the readers' common queue) --------------------------------------
class Reading(NamedTuple):
    """Read `frame` into slot `slot` of worker `rank`'s ring, as its `position`."""

    gen: int
    rank: int
    slot: int
    position: int
    frame: int


class RunOver(NamedTuple):
    """A warm engine's run `gen` is over (the parent puts one per reader on the queue): the
    reader that takes it unmaps the run's rings now, while it waits, rather than when the
    next run's first task arrives (freeing a ring of ~1 GB costs ~0.1 s)."""

    gen: int


#: the parent's handler of each message a process sends
HANDLERS = {Hello: "on_hello", Ready: "on_ready", Done: "on_done", Cancelled: "on_cancelled",
            More: "on_more", Failed: "on_error"}
