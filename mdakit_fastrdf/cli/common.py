"""What every command of ``mdakit-fastrdf`` shares: its name, its errors and their words
(:func:`cli_message`), the argument types (``--backend``, ``--blocks``, ``--device``, ...),
the checks before a run (:func:`check_run_args`) and the atom selections.

The program (:mod:`~mdakit_fastrdf.cli.app`) and the commands
(:mod:`~mdakit_fastrdf.cli.commands`) import them from here: the program imports the
commands, and the commands never import the program.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import MDAnalysis as mda
from MDAnalysis.exceptions import SelectionError

from ..analysis.declarations import int_at_least as _int_at_least

PROG = "mdakit-fastrdf"


OUTPUT_SUFFIXES = (".csv", ".npz", ".h5", ".hdf5")


class CLIError(Exception):
    """An error reported to the user as a one-line message."""


#: keyword arguments of the analysis that are options of the CLI (for error messages)
KEYWORD_OPTIONS = {
    "norm": "--norm", "nbins": "--nbins", "range": "--range",
    "exclusion_block": "--exclusion-block", "exclude_same": "--exclude-same",
    "device": "--device", "precision": "--precision", "n_threads": "--n-threads",
    "backend": "--backend", "n_workers": "--n-workers", "blocks": "--blocks",
    "start": "--start", "stop": "--stop", "step": "--step",
    "normalization_mode": "--finite-size", "compound": "--compound", "center": "--center",
    "unwrap": "--no-unwrap",
}


_KEYWORD_VALUE = re.compile(
    r"(?<![\w.-])(?P<key>" + "|".join(KEYWORD_OPTIONS) + r")="
    r"(?P<value>'[^']*'|\"[^\"]*\"|\([^()]*\)|\[[^\[\]]*\]|[^\s,;:()\[\]]+)"
)


def _option_value(value: str) -> str:
    """A Python literal of an error message as the CLI's option value: 'x' -> x, (1, 2) -> 1 2."""
    if value[:1] in "'\"":
        return value[1:-1]
    if value[:1] in "([":
        parts = (part.strip().strip("'\"") for part in value[1:-1].split(","))
        return " ".join(part for part in parts if part)
    return value


def _not_name_fix(match: re.Match, context: dict) -> str:
    """The CLI's fix for atoms without elements: leave their names out of --select."""
    names = re.findall(r"'([^']*)' x\d+", match["names"])
    select = context.get("select") or "..."
    if not names:
        return match[0]
    return (f'; leave them out of --select, e.g. --select "{select} and not name '
            f'{" ".join(names)}"')


#: Python fixes named in the analyses' messages, and what a command-line user does instead:
#: ``(pattern, replacement)``, the replacement a string or a function of the match and the
#: command's context (``{"select": ...}``). Applied by :func:`cli_message` after the
#: keyword arguments.
PYTHON_FIXES = (
    (re.compile(r"; names lacking elements: (?P<names>[^.]*)\. A virtual "
                r"site without mass \(such as TIP4P's MW\) has no element and scatters "
                r"nothing: leave it out of the atoms\. Guess them .*$", re.S),
     lambda m, c: (f"; names lacking elements: {m['names']}. A virtual site "
                   f"without mass (such as TIP4P's MW) has no element and scatters nothing"
                   f"{_not_name_fix(m, c)}" + ("" if c.get("guessed") else
                                               "; or guess the elements: --guess-elements"))),
    (re.compile(r"\(u\.guess_TopologyAttrs\(to_guess=\['elements'\]\)\)"),
     "(--guess-elements)"),
    (re.compile(r"\bPass (--[\w-]+)\b"), r"Add \1"),
    (re.compile(r"\bg([12]) \('"), r"-s\1 ('"),
    (re.compile(r"\(start, stop, step\)"), "(--start, --stop, --step)"),
)


def cli_message(message: str, options: dict | None = None, context: dict | None = None) -> str:
    """Rewrite the Python that an analysis's error `message` names as the CLI's options.

    The one place where errors reached from the command line learn its words: the keyword
    arguments of the analysis become options, ``norm='density'`` ``--norm density``,
    ``exclusion_block=(1, 1)`` ``--exclusion-block 1 1``, ``key=None`` ``no --key``, a flag
    ``ignore_box=True`` ``--ignore-box`` (``False``: ``no --ignore-box``); then the Python
    fixes of :data:`PYTHON_FIXES` become the command line's. Other text is unchanged.

    Parameters
    ----------
    message : str
        The error message.
    options : dict, optional
        ``{keyword: flag}`` of the command's own options (a subcommand's), besides
        :data:`KEYWORD_OPTIONS`.
    context : dict, optional
        What the fixes may quote: ``select`` (the --select of a subcommand), ``guessed``
        (elements were guessed).
    """
    table = {**KEYWORD_OPTIONS, **(options or {})}
    pattern = _KEYWORD_VALUE if not options else re.compile(
        r"(?<![\w.-])(?P<key>" + "|".join(sorted(map(re.escape, table), key=len,
                                                 reverse=True)) + r")="
        r"(?P<value>'[^']*'|\"[^\"]*\"|\([^()]*\)|\[[^\[\]]*\]|[^\s,;:()\[\]]+)")

    def replace(match):
        option, value = table[match["key"]], match["value"]
        if match["key"] == "normalization_mode":  # a flag: 'finite_size' or 'exact'
            return option if "finite" in value else f"no {option}"
        if match["key"] == "unwrap":  # the CLI's flag says the opposite
            return option if value == "False" else f"no {option}"
        if value in ("None", "False"):
            return f"no {option}"
        if value == "True":
            return option
        return f"{option} {_option_value(value)}".rstrip()

    message = pattern.sub(replace, message)
    for fix, replacement in PYTHON_FIXES:
        if callable(replacement):
            message = fix.sub(lambda m, r=replacement: r(m, context or {}), message)
        else:
            message = fix.sub(replacement, message)
    return message


def check_run_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The checks every command shares (this one and the analyses' subcommands): input
    files, the output file, the backend's workers, the plot file and the CUDA device."""
    for name in ("topology", "trajectory"):
        path = getattr(args, name)
        if path is not None and not Path(path).is_file():
            parser.error(f"{name} file not found: {path}")
    if args.output.suffix.lower() not in OUTPUT_SUFFIXES:
        parser.error(f"--output must end in .csv, .npz, .h5 or .hdf5, got {str(args.output)!r}")
    _check_writable(parser, "--output", args.output)
    if args.output.suffix.lower() in (".h5", ".hdf5"):
        try:
            import h5py  # noqa: F401
        except ImportError:
            parser.error("--output .h5/.hdf5 needs h5py: pip install h5py "
                         "(or use .csv or .npz)")
    if args.n_workers is not None and args.backend == "serial":
        parser.error("--n-workers needs a parallel --backend (multiprocessing, dask, ...)")
    if args.plot is not None:
        _check_plot(parser, args.plot)
        _check_writable(parser, "--plot", args.plot)
    if args.device.startswith("cuda"):
        problem = _cuda_problem(args.device, in_this_process=args.backend == "serial")
        if problem is not None:
            parser.error(f"--device {args.device}: {problem}; use --device cpu or --device auto")


def _check_writable(parser: argparse.ArgumentParser, option: str, path: Path) -> None:
    """Fail before any computation when `path` cannot be written."""
    directory = path.parent
    if path.is_dir():
        parser.error(f"{option}: {str(path)!r} is a directory; give a file name")
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        parser.error(f"{option}: cannot write {str(path)!r}: the directory "
                     f"{str(directory)!r} {what}")
    if not os.access(directory, os.W_OK | os.X_OK):
        parser.error(f"{option}: cannot write {str(path)!r}: the directory "
                     f"{str(directory)!r} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        parser.error(f"{option}: cannot write {str(path)!r}: the file is not writable")


def _check_plot(parser: argparse.ArgumentParser, path: Path) -> None:
    """--plot needs matplotlib and a file suffix that matplotlib writes."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        parser.error("--plot needs matplotlib: `pip install matplotlib`")
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        known = ", ".join(f".{s}" for s in sorted(formats))
        parser.error(f"--plot: {str(path)!r} must end in a format matplotlib writes "
                     f"({known})")


_CUDA_CHECK = """
import json
from mdakit_fastrdf.engine import cuda_devices, cuda_unavailable_reason
why = cuda_unavailable_reason()
print(json.dumps({"why": why, "count": 0 if why else len(cuda_devices())}))
"""


def _cuda_problem(device: str, in_this_process: bool) -> str | None:
    """Why `device` ('cuda:N') cannot run here, or None; checked before any frame runs.

    A serial run initialises CUDA here as its first frame would; for a parallel backend the
    check runs in a separate interpreter, so that no CUDA state is created in this process
    before it forks its workers.
    """
    index = int(device.partition(":")[2] or 0)
    if in_this_process:
        from mdakit_fastrdf.engine import cuda

        why = cuda.cuda_unavailable_reason()
        count = 0 if why else len(cuda.cuda_devices())
    else:
        try:
            import tempfile

            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
            # outside the working directory, which `python -c` puts first on the path: a
            # source checkout there without its compiled module would shadow the package
            proc = subprocess.run([sys.executable, "-c", _CUDA_CHECK], capture_output=True,
                                  text=True, timeout=300, check=True, env=env,
                                  cwd=tempfile.gettempdir())
            import json

            found = json.loads(proc.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None  # cannot tell here: the workers report it
        why, count = found["why"], found["count"]
    if why is not None:
        return why
    if index >= count:
        return f"no GPU {index} here ({count} CUDA device{'s' if count != 1 else ''} found)"
    return None


def _backend(text: str) -> str:
    """--backend: one of the names of :data:`~mdakit_fastrdf.backends.mixin.BACKEND_NAMES`
    (case ignored); otherwise the names and the closest one."""
    from mdakit_fastrdf.backends.mixin import BACKEND_NAMES, closest_backend

    name = text.strip().lower()
    if name not in BACKEND_NAMES:
        close = closest_backend(name) if name else None
        hint = f" (did you mean {close}?)" if close else ""
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a backend{hint}; the backends are {', '.join(BACKEND_NAMES)}")
    return name


def _blocks(text: str) -> int:
    return _int_at_least(text, 2, "an integer of at least 2 (blocks to estimate an error from)")


def _device(text: str) -> str:
    from mdakit_fastrdf.engine import cuda

    try:
        return cuda.validate_device(text)
    except (TypeError, ValueError) as exc:
        # the engine's message starts with "device='cuda': ..." when it names the value
        message = re.sub(r"^device=('[^']*'|\"[^\"]*\"):\s*", "", str(exc))
        if message == str(exc):
            message = f"expected auto, cpu, cuda or cuda:N, got {text!r}"
        else:
            message = f"cannot use {text!r}: {cli_message(message)}"
        raise argparse.ArgumentTypeError(message) from None


def _select(universe: mda.Universe, selection: str, updating: bool = False) -> mda.AtomGroup:
    try:
        group = universe.select_atoms(selection, updating=updating)
    except SelectionError as exc:
        raise CLIError(f"invalid selection {selection!r}: {exc}") from None
    if len(group) == 0 and not updating:  # (an updating one may fill in later frames)
        raise CLIError(f"selection {selection!r} matches no atoms")
    return group
