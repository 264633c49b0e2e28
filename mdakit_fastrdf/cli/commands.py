"""The commands of ``mdakit-fastrdf``: one per analysis that declares a
:class:`~mdakit_fastrdf.analysis.declarations.Command`.

``mdakit-fastrdf NAME [topology [trajectory]] [options]`` builds the analysis from the atoms
of ``--select`` and its own options, runs it over the frames with the common options
(frames, device, precision, parallel backend, blocks) and writes the results (CSV, NPZ or
HDF5, read back by :func:`mdakit_fastrdf.load`) and optionally a plot. Everything comes from
the class's declaration and its hooks; nothing here knows an analysis by name. Without a
topology the command runs on the MDAnalysisTests data its declaration names. The main
command (``mdakit-fastrdf [topology [trajectory]] [options]``, without a name) is the one
declared with ``main=True``, run the same way; a declaration with a ``switch`` adds its
options to the command of its name and runs its class when the switch is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..analysis.declarations import positive_int as _positive_int
from .common import (
    PROG,
    CLIError,
    _backend,
    _blocks,
    _device,
    _select,
    check_run_args,
    cli_message,
)

__all__ = ["build_command_parser", "check_command_args", "command_failed", "commands",
           "main_analysis", "main_command", "run_command"]

#: The argparse groups every command has, after the ones its options declare.
COMMON_GROUPS = ("frames", "computation", "output")


def _declarations() -> dict:
    """``{name: [(class, Command), ...]}`` of every registered analysis class that declares
    a ``command`` of its own (a subclass does not inherit its parent's): the main
    declaration first, then the variants (declarations with a ``switch``)."""
    from ..analysis.declarations import analysis_classes

    found = {}
    for cls in analysis_classes().values():
        cmd = cls.__dict__.get("command")
        if cmd is not None:
            found.setdefault(cmd.name, []).append((cls, cmd))
    for decls in found.values():
        decls.sort(key=lambda d: d[1].switch is not None)
    return found


def commands() -> dict:
    """The subcommands: ``{name: analysis class}`` of the main declarations of every name
    except the program's main command (``main=True``)."""
    found = {name: decls[0][0] for name, decls in _declarations().items()
             if decls[0][1].switch is None and not decls[0][1].main}
    return dict(sorted(found.items()))


def main_analysis():
    """The analysis class whose command is the program's main one (``main=True``)."""
    for decls in _declarations().values():
        cls, cmd = decls[0]
        if cmd.main and cmd.switch is None:
            return cls
    raise RuntimeError("no analysis declares the main command: import mdakit_fastrdf")


def _variants(cls) -> list:
    """``[(class, Command)]`` of the variants that join the command of `cls`."""
    return [d for d in _declarations().get(cls.command.name, []) if d[1].switch is not None]


def _prog(cmd) -> str:
    return PROG if cmd.main else f"{PROG} {cmd.name}"


def _add_option(group, opt) -> None:
    kwargs = dict(opt.kwargs)
    kwargs.setdefault("default", None)
    group.add_argument(*opt.flags, dest=opt.dest, **kwargs)


def build_command_parser(cls, more=()) -> argparse.ArgumentParser:
    """The :class:`argparse.ArgumentParser` of the command of analysis class `cls` (with
    the options of its variants); `more`: further options (:class:`Option`), each last in
    its group (the program's own, such as ``--info``)."""
    cmd = cls.command
    parser = argparse.ArgumentParser(
        prog=_prog(cmd),
        description=cmd.description or f"{cmd.help} ({cls.__name__}). Without a topology: "
        f"the MDAnalysisTests demo data {', '.join(cmd.demo)}.",
    )
    parser.add_argument("topology", nargs="?", help="topology file (default: demo data)")
    parser.add_argument("trajectory", nargs="?",
                        help="trajectory file (default: the topology's coordinates)")
    if cmd.groups is None:
        parser.add_argument("--select", default=cmd.select,
                            help="atoms to analyse (default: %(default)r)")
    if cmd.guess_elements:
        parser.add_argument("--guess-elements", action="store_true",
                            help="guess the elements the topology lacks from atom names and "
                            "types (MDAnalysis's guesser; on by default for the demo data)")
    declared = [(opt, opt.group or f"{owner.__name__} options")
                for owner, c in [(cls, cmd), *_variants(cls)] for opt in c.options]
    groups = {title: parser.add_argument_group(title)
              for title in dict.fromkeys(t for _, t in declared) if title not in COMMON_GROUPS}
    groups.update((title, parser.add_argument_group(title)) for title in COMMON_GROUPS)

    def add_declared(title):
        """The options declared in group `title`: each set of mutually exclusive ones last."""
        mine = [opt for opt, t in declared if t == title]
        exclusive = {}
        for opt in mine:
            if opt.exclusive is None:
                _add_option(groups[title], opt)
        for opt in mine:
            if opt.exclusive is not None:
                if opt.exclusive not in exclusive:
                    exclusive[opt.exclusive] = groups[title].add_mutually_exclusive_group()
                _add_option(exclusive[opt.exclusive], opt)

    for title in groups:
        if title not in COMMON_GROUPS:
            add_declared(title)

    def help_of(dest, text):
        return cmd.common_help.get(dest, text)

    frames = groups["frames"]
    frames.add_argument("--start", type=int, help="first frame")
    frames.add_argument("--stop", type=int, help="stop before this frame")
    frames.add_argument("--step", type=_positive_int, help="frame step")
    add_declared("frames")

    compute = groups["computation"]
    compute.add_argument("--device", type=_device, default="auto",
                         help=help_of("device", "auto, cpu, cuda or cuda:N (default: "
                                                "%(default)s)"))
    compute.add_argument("--precision", choices=("single", "double"), default="double",
                         help=help_of("precision", "precision of the pair distances "
                                                   "(default: %(default)s)"))
    compute.add_argument("--n-threads", type=_positive_int,
                         help=help_of("n_threads", "CPU threads per process (default: all "
                                                   "cores)"))
    compute.add_argument("--backend", type=_backend, default="serial", metavar="NAME",
                         help=help_of("backend", "parallel backend over frames: serial, "
                                      "multiprocessing, dask, node (default: %(default)s)"))
    compute.add_argument("--n-workers", type=_positive_int,
                         help=help_of("n_workers", "workers of a parallel backend"))
    compute.add_argument("--blocks", type=_blocks, metavar="N",
                         help=help_of("blocks", "also give standard errors from N blocks of "
                                                "frames"))
    add_declared("computation")

    output = groups["output"]
    output.add_argument("-o", "--output", type=Path, default=Path(f"{cmd.name}.csv"),
                        help=help_of("output", "results file: .csv, .npz or .h5/.hdf5 "
                                               "(default: %(default)s)"))
    output.add_argument("--plot", type=Path, metavar="FILE",
                        help=help_of("plot", "also plot to FILE (png, pdf, svg; needs "
                                             "matplotlib)"))
    add_declared("output")
    output.add_argument("--no-progress", action="store_true",
                        help=help_of("no_progress", "do not show a progress bar"))
    for opt in more:
        _add_option(groups[opt.group], opt)
    return parser


def check_command_args(cls, parser, args) -> None:
    """The checks before anything is loaded: those every command shares, then the
    command's ``validate`` hook (argparse errors, exit status 2)."""
    check_run_args(parser, args)
    validate = cls.command.validate
    problem = validate(args) if validate is not None else None
    if problem:
        parser.error(problem)


def _universe(args, cmd):
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
    files = [getattr(data, name) for name in cmd.demo]
    args.topology = files[0]
    args.trajectory = files[1] if len(files) > 1 else None
    universe = mda.Universe(*files)
    names, n = ", ".join(Path(f).name for f in files), len(universe.trajectory)
    if cmd.demo_about:
        print(f"No topology given: using the MDAnalysisTests demo data, {cmd.demo_about} "
              f"({names}, {n} frames).")
    else:
        print(f"No topology given: using the MDAnalysisTests demo data {names} ({n} frames).")
    return universe


def _chosen(cls, args):
    """The class and declaration to run: the variant whose switch is given, else `cls`'s.
    The options of a variant not chosen must be left at their defaults."""
    chosen = (cls, cls.command)
    for vcls, vcmd in _variants(cls):
        if getattr(args, vcmd.switch) is not None:
            chosen = (vcls, vcmd)
            continue
        switch = next(o for o in vcmd.options if o.dest == vcmd.switch)
        given = [o.flags[-1] for o in vcmd.options if o.dest != vcmd.switch
                 and getattr(args, o.dest) != o.kwargs.get("default")]
        if given:
            others = " and ".join(o.flags[-1] for o in vcmd.options if o is not switch)
            needs = f"{switch.flags[-1]} {switch.kwargs.get('metavar', '')}".strip()
            raise CLIError(f"{others} need {needs} ({vcmd.help})")
    return chosen


def _keywords(declarations, args) -> dict:
    kwargs = {}
    for opt in (o for c in declarations for o in c.options if o.keyword):
        value = getattr(args, opt.dest)
        if value is not None:
            kwargs[opt.dest] = value if opt.convert is None else opt.convert(value)
    kwargs.update(device=args.device, precision=args.precision)
    if args.n_threads is not None:
        kwargs["n_threads"] = args.n_threads
    return kwargs


def run_command(cls, args) -> None:
    """Build, run and save the analysis of class `cls` that parsed `args` describe, and
    print the summary (its command's hooks do the steps they declare)."""
    from ..engine import available_cpus
    from ..outputs.plotting import plot

    cmd = cls.command
    demo = args.topology is None
    universe = _universe(args, cmd)
    lacks = not hasattr(universe.atoms, "elements") or not all(universe.atoms.elements)
    if cmd.guess_elements and (args.guess_elements or demo) and lacks:
        universe.guess_TopologyAttrs(to_guess=["elements"])
        args.elements_guessed = True
        print("Elements: guessed from atom names and types (MDAnalysis's guesser)")
    if cmd.groups is None:
        groups = (_select(universe, args.select),)
    else:
        groups = tuple(cmd.groups(lambda text, updating=False: _select(universe, text, updating),
                                  args))
    if cmd.prepare is not None:
        cmd.prepare(args, groups)
    run_cls, run_cmd = _chosen(cls, args)
    if run_cmd is not cmd and run_cmd.prepare is not None:
        run_cmd.prepare(args, groups)
    kwargs = _keywords((cmd,) if run_cmd is cmd else (cmd, run_cmd), args)
    if run_cmd.build is not None:
        analysis = run_cmd.build(run_cls, groups, kwargs, args)
    else:
        analysis = run_cls(*groups, **kwargs)
    n_workers = args.n_workers
    if n_workers is None and args.backend in ("multiprocessing", "dask"):
        n_workers = available_cpus()
    t0 = time.perf_counter()
    analysis.run(start=args.start, stop=args.stop, step=args.step,
                 verbose=not args.no_progress and args.backend == "serial",
                 backend=args.backend, n_workers=n_workers, blocks=args.blocks)
    wall = time.perf_counter() - t0
    args.wall_s = wall
    metadata = cmd.metadata(args) if cmd.metadata is not None else {"select": args.select}
    analysis.save(args.output, metadata={**metadata, "command": _prog(cmd),
                                         "wall_s": round(wall, 6)})
    if args.plot is not None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.0, 4.0), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        if cmd.plot is not None:
            cmd.plot(analysis, ax, args)
        else:
            plot(analysis, ax)
            ax.set_title(f"{cls.__name__}: {args.select}")
        fig.savefig(args.plot, dpi=150)
    what = (f"{len(groups[0])} atoms ({args.select!r})" if cmd.groups is None else
            " x ".join(str(len(g)) for g in groups) + " atoms")
    lines = {"System": f"{what}, {analysis.n_frames} frames",
             "Run time": f"{wall:.3f} s ({args.precision} precision, device {args.device})"}
    written = [args.output]
    if args.output.suffix.lower() == ".csv":
        from ..outputs.io import csv_paths

        written = csv_paths(analysis, args.output)  # sq.csv, sq_gr.csv: a table per axis
    lines["Results"] = (f"{', '.join(map(str, written))} (read with "
                        f"mdakit_fastrdf.load({str(args.output)!r}))")
    if args.plot is not None:
        lines["Plot"] = str(args.plot)
    if cmd.report is not None:
        printed = list(cmd.report(analysis, args, lines))
    else:
        printed = [(label, lines[label]) for label in ("System", "Run time")]
        if cmd.summary is not None:
            printed += list(cmd.summary(analysis))
        printed += [(label, lines[label]) for label in ("Results", "Plot") if label in lines]
    width = max(len(label) for label, _ in printed)
    for label, text in printed:
        print(cmd.summary_format.format(label=label, text=text, width=width))


def command_failed(cls, args, exc) -> int:
    """Report `exc`, raised while running the command of `cls`, as one line in the command
    line's words (:func:`~.common.cli_message`); return the exit status, 1."""
    cmd = cls.command
    options = {o.dest: o.flags[-1] for o in cmd.options if o.keyword}
    context = {"select": getattr(args, "select", None),
               "guessed": getattr(args, "elements_guessed", False)}
    message = cli_message(str(exc), options, context) or type(exc).__name__
    print(f"{_prog(cmd)}: error: {message}", file=sys.stderr)
    return 1


def main_command(name: str, argv: Sequence[str]) -> int:
    """Run subcommand `name` with arguments `argv` (exit status as :func:`~mdakit_fastrdf.cli.main`)."""
    cls = commands()[name]
    parser = build_command_parser(cls)
    args = parser.parse_args(list(argv))
    check_command_args(cls, parser, args)
    try:
        run_command(cls, args)
    except Exception as exc:  # noqa: BLE001 - any failure is a message, not a traceback
        return command_failed(cls, args, exc)
    return 0
