"""The errors of the parallel backends: a worker failed, a worker died, and the traceback of
an exception raised in a worker (set as its ``__cause__``)."""

from __future__ import annotations

__all__ = ["RemoteTraceback", "WorkerDiedError", "WorkerError"]


class WorkerError(RuntimeError):
    """A backend worker failed; the message names the worker and its frames."""


class WorkerDiedError(WorkerError):
    """A backend worker process ended without finishing its frames (killed, crashed)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (set as ``__cause__``)."""

    def __init__(self, tb):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return self.tb
