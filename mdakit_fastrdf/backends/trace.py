"""Where a parallel run's time goes: timestamps of its phases in every process.

With the environment variable ``MDAKIT_FASTRDF_TRACE`` set to a directory, the node
backend's parent, compute workers and readers each append one JSON line per event to
``DIR/trace-<pid>.jsonl``: the wall clock (``time.time()``, common to the processes of a
node), the process's pid and role, the event and a few numbers. Unset (the default), a
:func:`mark` costs one dictionary lookup.

Events (``t`` seconds since the epoch):

* parent: ``apply`` (the backend got the parts), ``payload`` (the analysis pickled),
  ``launched`` (every process started or told of the run), ``ready`` (a worker's first
  message of the run), ``done`` (a part came back), ``loop_end``, ``finished`` (processes
  ended or kept, files removed);
* compute worker: ``entry`` (its target function started: the interpreter and imports
  before it, for a spawned process), ``payload`` (received), ``unpickled`` (with the
  Universes ``kept`` and ``unpickled``, :mod:`.payload`), ``client`` (its feed ready),
  ``layout`` (a GPU worker's species layout made), ``warm`` (its engine made before the
  first frame: a GPU's CUDA context), ``part`` / ``part_end``,
  ``frame`` (a fed frame handed to the analysis, with the seconds waited for it) and
  ``frame_end`` (the analysis done with it);
* reader: ``entry``, ``unpickled``, ``read`` (a frame written into a ring, with the seconds
  the reading took).

``benchmarks/trace_report.py DIR`` summarises a directory: each phase's time from the
parent's ``apply``, and each compute worker's seconds per frame split into waiting for
frames and the analysis's own work.
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["mark", "trace_directory"]

_ENV = "MDAKIT_FASTRDF_TRACE"
_files: dict = {}


def trace_directory() -> str | None:
    """The directory traces go to (``MDAKIT_FASTRDF_TRACE``), or None: no tracing."""
    return os.environ.get(_ENV) or None


def mark(event: str, role: str, **info) -> None:
    """Append `event` of this process (`role`: ``'parent'``, ``'gpu'``, ``'cpu'`` or
    ``'reader'``) with the numbers `info` to this process's trace file, if tracing is on."""
    d = os.environ.get(_ENV)
    if not d:
        return
    t = time.time()
    pid = os.getpid()
    f = _files.get((pid, d))
    if f is None:
        os.makedirs(d, exist_ok=True)
        f = _files[(pid, d)] = open(os.path.join(d, f"trace-{pid}.jsonl"), "a", buffering=1)  # noqa: SIM115
    f.write(json.dumps({"t": t, "pid": pid, "role": role, "event": event, **info}) + "\n")
