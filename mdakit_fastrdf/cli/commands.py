"""Subcommands of ``mdakit-fastrdf``: one per analysis that declares a
:class:`~mdakit_fastrdf.analysis.declarations.Command`.

``mdakit-fastrdf NAME [topology [trajectory]] [options]`` builds the analysis from the atoms
of ``--select`` and its own options, runs it over the frames with the common options
(frames, device, precision, parallel backend, blocks) and writes the results (CSV, NPZ or
HDF5, read back by :func:`mdakit_fastrdf.load`) and optionally a plot. Everything comes from
the class's declaration; nothing here knows an analysis by name. Without a topology the
command runs on the MDAnalysisTests data its declaration names.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .common import (
    PROG,
    CLIError,
    _backend,
    _blocks,
    _device,
    _positive_int,
    _select,
    check_run_args,
    cli_message,
)

__all__ = ["build_command_parser", "commands", "main_command"]


def commands() -> dict:
    """The subcommands: ``{name: analysis class}`` for every registered analysis class that
    declares a ``command`` of its own (a subclass does not inherit its parent's)."""
    from ..analysis.declarations import analysis_classes

    found = {}
    for cls in analysis_classes().values():
        cmd = cls.__dict__.get("command")
        if cmd is not None:
            found[cmd.name] = cls
    return dict(sorted(found.items()))


def build_command_parser(cls) -> argparse.ArgumentParser:
    """The :class:`argparse.ArgumentParser` of the subcommand of analysis class `cls`."""
    cmd = cls.command
    parser = argparse.ArgumentParser(
        prog=f"{PROG} {cmd.name}",
        description=f"{cmd.help} ({cls.__name__}). Without a topology: the MDAnalysisTests "
        f"demo data {', '.join(cmd.demo)}.",
    )
    parser.add_argument("topology", nargs="?", help="topology file (default: demo data)")
    parser.add_argument("trajectory", nargs="?",
                        help="trajectory file (default: the topology's coordinates)")
    parser.add_argument("--select", default=cmd.select,
                        help="atoms to analyse (default: %(default)r)")
    if cmd.guess_elements:
        parser.add_argument("--guess-elements", action="store_true",
                            help="guess the elements the topology lacks from atom names and "
                            "types (MDAnalysis's guesser; on by default for the demo data)")
    own = parser.add_argument_group(f"{cls.__name__} options")
    for opt in cmd.options:
        kwargs = dict(opt.kwargs)
        kwargs.setdefault("default", None)
        own.add_argument(*opt.flags, dest=opt.dest, **kwargs)

    frames = parser.add_argument_group("frames")
    frames.add_argument("--start", type=int, help="first frame")
    frames.add_argument("--stop", type=int, help="stop before this frame")
    frames.add_argument("--step", type=_positive_int, help="frame step")

    compute = parser.add_argument_group("computation")
    compute.add_argument("--device", type=_device, default="auto",
                         help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    compute.add_argument("--precision", choices=("single", "double"), default="double",
                         help="precision of the pair distances (default: %(default)s)")
    compute.add_argument("--n-threads", type=_positive_int,
                         help="CPU threads per process (default: all cores)")
    compute.add_argument("--backend", type=_backend, default="serial", metavar="NAME",
                         help="parallel backend over frames: serial, multiprocessing, dask, "
                         "node (default: %(default)s)")
    compute.add_argument("--n-workers", type=_positive_int,
                         help="workers of a parallel backend")
    compute.add_argument("--blocks", type=_blocks, metavar="N",
                         help="also give standard errors from N blocks of frames")

    output = parser.add_argument_group("output")
    output.add_argument("-o", "--output", type=Path, default=Path(f"{cmd.name}.csv"),
                        help="results file: .csv, .npz or .h5/.hdf5 (default: %(default)s)")
    output.add_argument("--plot", type=Path, metavar="FILE",
                        help="also plot to FILE (png, pdf, svg; needs matplotlib)")
    output.add_argument("--no-progress", action="store_true",
                        help="do not show a progress bar")
    return parser


def _universe(args, demo):
    import MDAnalysis as mda

    if args.topology is not None:
        return mda.Universe(args.topology, *([args.trajectory] if args.trajectory else []))
    try:
        import MDAnalysisTests.datafiles as data
    except ImportError:
        raise CLIError(
            "no topology given and MDAnalysisTests, which ships the demo data, is not "
            "installed: pass a topology (and trajectory) or `pip install MDAnalysisTests`"
        ) from None
    files = [getattr(data, name) for name in demo]
    args.topology = files[0]
    args.trajectory = files[1] if len(files) > 1 else None
    universe = mda.Universe(*files)
    print(f"No topology given: using the MDAnalysisTests demo data "
          f"{', '.join(Path(f).name for f in files)} ({len(universe.trajectory)} frames).")
    return universe


def _run(cls, args) -> None:
    from ..engine import available_cpus
    from ..outputs.plotting import plot

    cmd = cls.command
    demo = args.topology is None
    universe = _universe(args, cmd.demo)
    lacks = not hasattr(universe.atoms, "elements") or not all(universe.atoms.elements)
    if cmd.guess_elements and (args.guess_elements or demo) and lacks:
        universe.guess_TopologyAttrs(to_guess=["elements"])
        args.elements_guessed = True
        print("Elements: guessed from atom names and types (MDAnalysis's guesser)")
    atoms = _select(universe, args.select)
    kwargs = {}
    for o in cmd.options:
        value = getattr(args, o.dest)
        if value is not None:
            kwargs[o.dest] = value if o.convert is None else o.convert(value)
    kwargs.update(device=args.device, precision=args.precision)
    if args.n_threads is not None:
        kwargs["n_threads"] = args.n_threads
    analysis = cls(atoms, **kwargs)
    n_workers = args.n_workers
    if n_workers is None and args.backend in ("multiprocessing", "dask"):
        n_workers = available_cpus()
    t0 = time.perf_counter()
    analysis.run(start=args.start, stop=args.stop, step=args.step,
                 verbose=not args.no_progress and args.backend == "serial",
                 backend=args.backend, n_workers=n_workers, blocks=args.blocks)
    wall = time.perf_counter() - t0
    analysis.save(args.output, metadata={"select": args.select,
                                         "command": f"{PROG} {cmd.name}",
                                         "wall_s": round(wall, 6)})
    if args.plot is not None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.0, 4.0), layout="constrained")
        FigureCanvasAgg(fig)
        ax = plot(analysis, fig.add_subplot())
        ax.set_title(f"{cls.__name__}: {args.select}")
        fig.savefig(args.plot, dpi=150)
    lines = [("System", f"{len(atoms)} atoms ({args.select!r}), {analysis.n_frames} frames"),
             ("Run time", f"{wall:.3f} s ({args.precision} precision, device {args.device})")]
    if cmd.summary is not None:
        lines += list(cmd.summary(analysis))
    written = [args.output]
    if args.output.suffix.lower() == ".csv":
        from ..outputs.io import csv_paths

        written = csv_paths(analysis, args.output)  # sq.csv, sq_gr.csv: a table per axis
    lines.append(("Results", f"{', '.join(map(str, written))} (read with "
                             f"mdakit_fastrdf.load({str(args.output)!r}))"))
    if args.plot is not None:
        lines.append(("Plot", str(args.plot)))
    width = max(len(label) for label, _ in lines)
    for label, text in lines:
        print(f"{label:<{width}} : {text}")


def main_command(name: str, argv: Sequence[str]) -> int:
    """Run subcommand `name` with arguments `argv` (exit status as :func:`~mdakit_fastrdf.cli.main`)."""
    cls = commands()[name]
    parser = build_command_parser(cls)
    args = parser.parse_args(list(argv))
    check_run_args(parser, args)
    try:
        _run(cls, args)
    except Exception as exc:  # noqa: BLE001 - any failure is a message, not a traceback
        options = {o.dest: o.flags[-1] for o in cls.command.options}
        context = {"select": args.select, "guessed": getattr(args, "elements_guessed", False)}
        message = cli_message(str(exc), options, context) or type(exc).__name__
        print(f"{PROG} {name}: error: {message}", file=sys.stderr)
        return 1
    return 0
