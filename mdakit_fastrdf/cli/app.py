"""Command-line interface: ``mdakit-fastrdf``.

The main command computes a radial distribution function between two selections with
:class:`mdakit_fastrdf.InterRDF` (or :class:`mdakit_fastrdf.LateralRDF`, ``--lateral``) and
writes it, with the parameters of the run, to a CSV, NPZ or HDF5 file
(:func:`mdakit_fastrdf.save`; read it back with :func:`mdakit_fastrdf.load`), optionally with
a plot and block-averaged error estimates. Without a topology it runs on the adenylate
kinase in water demo system shipped with MDAnalysisTests::

    mdakit-fastrdf --plot rdf.png
    mdakit-fastrdf topol.tpr traj.xtc -s1 "name OW" -s2 "name HW1 HW2" -o rdf.npz
    mdakit-fastrdf topol.tpr traj.xtc --blocks 5 --backend multiprocessing --n-workers 4

Run ``mdakit-fastrdf --help`` for all options. This module is the program: the main command
and every subcommand are the commands (:class:`~mdakit_fastrdf.analysis.declarations.Command`) that
the analyses declare (``main=True`` for the main one), built and run by
:mod:`~mdakit_fastrdf.cli.commands`; it adds ``--info``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ..analysis.declarations import Option
from .commands import (
    build_command_parser,
    check_command_args,
    command_failed,
    commands,
    main_analysis,
    main_command,
    run_command,
)
from .common import PROG

#: The program's own option, last of the main command's output group.
INFO = Option(("--info",), "info", {
    "action": "store_true", "help": "print how the compiled kernel was built and exit"},
    group="output", keyword=False)


def build_parser():
    """Return the :class:`argparse.ArgumentParser` of the main command of ``mdakit-fastrdf``
    (the command that an analysis declares with ``main=True``) with ``--info``."""
    return build_command_parser(main_analysis(), more=(INFO,))


def cuda_line() -> str:
    """One line on the GPUs this process sees (initialises CUDA when the build has it)."""
    from mdakit_fastrdf.engine import cuda

    why = cuda.cuda_unavailable_reason()
    if why is not None:
        return f"none: {why}"
    return "; ".join(
        f"cuda:{d['index']} {d['name']} (sm_{d['compute_capability'][0]}{d['compute_capability'][1]}, "
        f"{d['total_memory'] / 2**30:.0f} GiB, {d['multiprocessors']} SMs)"
        for d in cuda.cuda_devices()
    )


def format_build_info(info: dict) -> str:
    """Return :func:`mdakit_fastrdf.build_info` as aligned ``key: value`` lines."""

    def fmt(value):
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, (list, tuple)):
            return ", ".join(map(str, value))
        return str(value)

    width = max(map(len, info))
    return "\n".join(f"{key:<{width}} : {fmt(value)}" for key, value in info.items())


def run(args) -> None:
    """Run the main command on its parsed command-line `args` (:func:`.commands.run_command`
    of the class that declares it)."""
    run_command(main_analysis(), args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mdakit-fastrdf``.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments without the program name; default
        ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status: 0 on success, 1 on a runtime error (reported as a
        message, without traceback). Invalid arguments exit with status 2 through
        :class:`SystemExit`, as usual for :mod:`argparse`.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    subcommands = commands()
    if argv and argv[0] in subcommands and not Path(argv[0]).exists():
        return main_command(argv[0], argv[1:])
    parser = build_parser()
    if subcommands:
        parser.epilog = "Other analyses, each with its own --help: " + "; ".join(
            f"{PROG} {name} ({cls.command.help})" for name, cls in subcommands.items())
    args = parser.parse_args(argv)
    if args.info:
        from mdakit_fastrdf import build_info

        info = build_info()
        info["cuda_devices"] = cuda_line()
        print(format_build_info(info))
        return 0
    cls = main_analysis()
    check_command_args(cls, parser, args)
    try:
        run(args)
    except Exception as exc:  # noqa: BLE001 - any failure is a message, not a traceback
        return command_failed(cls, args, exc)
    return 0
