"""Whether a worker started with 'spawn' or 'forkserver' would run the caller's script again.

Such a worker does not inherit the caller's memory: it imports the main script again (as
``__mp_main__``) so that what the script defines can be unpickled. The code of the script
outside ``if __name__ == "__main__":`` runs again there; when that code is what called
``run()``, each worker would start the run again. Python then stops the nested start with a
long error, but only after the script has run in the worker (loading its data, writing its
files), and a parent that is still writing a large analysis to that worker's pipe waited for
ever. The node backend therefore checks, before it starts any worker, where the call came
from (:func:`unguarded_main_call`) and raises :func:`main_guard_error` instead.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys

__all__ = ["main_guard_error", "unguarded_main_call"]


def _main_rerun_by_spawn(main) -> bool:
    """Whether a 'spawn' / 'forkserver' child imports ``main`` again (the rules of
    :func:`multiprocessing.spawn.get_preparation_data` and ``prepare``)."""
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:  # python -m module: run again, unless it is a __main__.py
        return not (name == "__main__" or name.endswith(".__main__"))
    path = getattr(main, "__file__", None)
    if path is None:  # interactive, python -c, a notebook: nothing to run again
        return False
    return os.path.splitext(os.path.basename(path))[0] != "ipython"


def _is_main_test(test) -> bool:
    """``__name__ == "__main__"`` (either way round) in an ``if`` test."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            sides = [node.left, node.comparators[0]]
            if (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
                    and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)):
                return True
    return False


def _guarded(source: str, lineno: int) -> bool | None:
    """Whether line `lineno` of `source` lies in the body of an ``if __name__ ==
    "__main__":`` block; None when the source cannot be parsed."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and node.body and _is_main_test(node.test)
                and node.body[0].lineno <= lineno <= node.body[-1].end_lineno):
            return True
    return False


def unguarded_main_call(frame=None):
    """``(file, line, text)`` of the main script's top-level statement that led to this call
    when a 'spawn' / 'forkserver' worker would run that statement again (it is not under
    ``if __name__ == "__main__":``); None otherwise, or when it cannot be told."""
    main = sys.modules.get("__main__")
    if main is None or not _main_rerun_by_spawn(main):
        return None
    main_globals = vars(main)
    frame = sys._getframe(1) if frame is None else frame
    while frame is not None:
        if frame.f_globals is main_globals and frame.f_code.co_name == "<module>":
            break
        frame = frame.f_back
    else:
        return None  # not called from the script's top level (a thread, an interpreter)
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    lines = linecache.getlines(filename, frame.f_globals)
    if not lines or _guarded("".join(lines), lineno) is not False:
        return None
    return filename, lineno, lines[lineno - 1].strip() if lineno <= len(lines) else ""


def main_guard_error(where, start_methods, gpu_workers: bool) -> RuntimeError:
    """The error for a run that :func:`unguarded_main_call` found at `where`."""
    filename, lineno, text = where
    methods = " and ".join(repr(m) for m in start_methods)
    fork = (" (GPU workers never fork)" if gpu_workers else
            ", or start the CPU workers with NodeBackend(start_method='fork')")
    return RuntimeError(
        f"The node backend starts worker processes with the {methods} start method, and each "
        f"such worker runs the main script {filename} again; line {lineno} ({text!r}) of "
        "it, which started this run, is not under 'if __name__ == \"__main__\":', so every "
        "worker would run the script and start this run again. No worker was started. Put "
        "the script's work under 'if __name__ == \"__main__\":' (see 'Safe importing of "
        f"main module' in the multiprocessing documentation){fork}.")
