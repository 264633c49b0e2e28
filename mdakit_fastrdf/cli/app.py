"""Command-line interface: ``mdakit-fastrdf``.

Computes a radial distribution function between two selections with
:class:`mdakit_fastrdf.InterRDF` and writes it, with the parameters of the run, to a CSV,
NPZ or HDF5 file (:func:`mdakit_fastrdf.save`; read it back with
:func:`mdakit_fastrdf.load`), optionally with a plot and block-averaged error estimates.
Without a topology it runs on the adenylate kinase in water demo system shipped with
MDAnalysisTests::

    mdakit-fastrdf --plot rdf.png
    mdakit-fastrdf topol.tpr traj.xtc -s1 "name OW" -s2 "name HW1 HW2" -o rdf.npz
    mdakit-fastrdf topol.tpr traj.xtc --blocks 5 --backend multiprocessing --n-workers 4

Run ``mdakit-fastrdf --help`` for all options.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import MDAnalysis as mda
import numpy as np

from .common import (  # noqa: F401  (KEYWORD_OPTIONS ... PYTHON_FIXES: named here too)
    KEYWORD_OPTIONS,
    OUTPUT_SUFFIXES,
    PROG,
    PYTHON_FIXES,
    CLIError,
    _backend,
    _blocks,
    _device,
    _positive_int,
    _select,
    check_run_args,
    cli_message,
)

QUANTITY = {"rdf": "g(r)", "density": "ρ(r)", "none": "n(r)"}


def build_parser() -> argparse.ArgumentParser:
    """Return the :class:`argparse.ArgumentParser` of ``mdakit-fastrdf``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Radial distribution function g(r) between two atom selections, "
            "computed with the compiled kernel of mdakit_fastrdf. Without a "
            "topology, the adenylate kinase in water demo system of "
            "MDAnalysisTests is used (water oxygen-oxygen g(r))."
        ),
    )
    parser.add_argument(
        "topology", nargs="?", help="topology file (default: demo data)"
    )
    parser.add_argument(
        "trajectory", nargs="?", help="trajectory file (default: the topology's coordinates)"
    )

    sel = parser.add_argument_group("selections and histogram")
    sel.add_argument(
        "-s1", "--select1", default="name OW",
        help="selection of the first group (default: %(default)r)",
    )
    sel.add_argument(
        "-s2", "--select2", default=None,
        help="selection of the second group (default: same as --select1)",
    )
    sel.add_argument(
        "--updating", action="store_true",
        help="evaluate -s1 and -s2 again in every frame (UpdatingAtomGroups, e.g. 'name OW "
             "and around 6 protein'); the normalisation takes each frame's group sizes",
    )
    sel.add_argument(
        "--nbins", type=_positive_int, default=75, help="number of bins (default: %(default)s)"
    )
    sel.add_argument(
        "--range", nargs=2, type=float, default=(0.0, 15.0), metavar=("RMIN", "RMAX"),
        help="distance range in Å (default: 0 15)",
    )
    sel.add_argument(
        "--norm", choices=("rdf", "density", "none"), default="rdf",
        help="normalisation, as in MDAnalysis InterRDF (default: %(default)s)",
    )
    sel.add_argument(
        "--finite-size", action="store_true",
        help="normalise g(r) of a selection with itself by its N(N-1) pairs of distinct "
        "atoms, so that it tends to 1 in a small system (freud's finite_size "
        "normalization_mode; needs --norm rdf and -s2 selecting the same atoms as -s1). "
        "Self pairs are then counted at r = 0 instead of excluded",
    )
    sel.add_argument(
        "--compound", choices=("group", "residues", "segments", "molecules", "fragments"),
        default=None,
        help="the RDF between the centres of these compounds of -s1 and -s2 instead of their "
        "atoms (InterRDF's compound=; --center chooses the centre)",
    )
    sel.add_argument(
        "--center", choices=("geometry", "mass"), default="geometry",
        help="with --compound: centre of geometry (default) or of mass",
    )
    sel.add_argument(
        "--no-unwrap", action="store_true",
        help="with --compound: take the positions as they are (molecules whole in the "
        "trajectory) instead of making each compound whole along its bonds",
    )
    sel.add_argument(
        "--lateral", choices=("x", "y", "z"), default=None, metavar="AXIS",
        help="a lateral (2D) RDF in the plane normal to AXIS (x, y or z; LateralRDF): "
        "in-plane distances, ring areas and the in-plane box area in the normalisation, "
        "as gmx rdf -xy for z",
    )
    sel.add_argument(
        "--slab", type=float, default=None, metavar="H",
        help="with --lateral: only the pairs whose separation along the normal is at most "
        "H Å (a slab of thickness 2H around each atom; maicos PDFPlanar's dzheight)",
    )
    sel.add_argument(
        "--slab-distance", choices=("lateral", "3d"), default="lateral",
        help="with --slab: bin the in-plane distance (default) or the 3D distance (maicos "
        "PDFPlanar's)",
    )
    exclusion = sel.add_mutually_exclusive_group()
    exclusion.add_argument(
        "--exclusion-block", nargs=2, type=_positive_int, metavar=("A", "B"),
        help="ignore pairs within blocks of A x B atoms (1 1 drops self pairs). Default: "
        "when -s1 and -s2 select the same atoms, 1 1 (self pairs, at r = 0, are not "
        "counted; see --keep-self-pairs), otherwise none",
    )
    exclusion.add_argument(
        "--exclude-same", choices=("residue", "segment", "chain"),
        help="ignore pairs within the same residue, segment or chain",
    )
    exclusion.add_argument(
        "--keep-self-pairs", action="store_true",
        help="when -s1 and -s2 select the same atoms, count each atom with itself too "
        "(distance 0, in the first bin) instead of excluding self pairs",
    )

    frames = parser.add_argument_group("frames")
    frames.add_argument("--start", type=int, help="first frame")
    frames.add_argument("--stop", type=int, help="stop before this frame")
    frames.add_argument("--step", type=_positive_int, help="frame step")

    compute = parser.add_argument_group("computation")
    compute.add_argument(
        "--device", type=_device, default="auto",
        help="device running the kernel: auto, cpu, cuda or cuda:N (default: %(default)s)",
    )
    compute.add_argument(
        "--precision", choices=("single", "double"), default="double",
        help="floating-point precision of the distances; double (the default) reproduces "
        "MDAnalysis's counts exactly, single may move a pair within float32 rounding of a "
        "bin edge into the next bin (default: %(default)s)",
    )
    compute.add_argument(
        "--n-threads", type=_positive_int,
        help="CPU threads per process (default: all cores, shared among the workers)",
    )
    compute.add_argument(
        "--backend", type=_backend, default="serial", metavar="NAME",
        help="parallel backend splitting the frames over processes: serial, "
        "multiprocessing or dask (MDAnalysis's), or node (every GPU and CPU socket of "
        "this machine) (default: %(default)s)",
    )
    compute.add_argument(
        "--n-workers", type=_positive_int,
        help="number of workers of a parallel backend (default for multiprocessing and "
        "dask: the number of cores this process may use)",
    )
    compute.add_argument(
        "--blocks", type=_blocks, metavar="N",
        help="also compute the RDF of N consecutive blocks of frames and write the "
        "standard error of the mean over the blocks (rdf_sem) and the per-block results",
    )

    output = parser.add_argument_group("output")
    output.add_argument(
        "-o", "--output", type=Path, default=Path("rdf.csv"),
        help="output file with the results and the parameters of the run: .csv (table "
        "with a header naming columns and units), .npz, or .h5/.hdf5 (needs h5py) "
        "(default: %(default)s)",
    )
    output.add_argument(
        "--plot", type=Path, metavar="FILE",
        help="also plot g(r) to FILE, in the format its suffix names (e.g. rdf.png, rdf.pdf, "
        "rdf.svg; needs matplotlib)",
    )
    output.add_argument(
        "--coordination", action="store_true",
        help="with --plot: also draw the running coordination number",
    )
    output.add_argument(
        "--no-progress", action="store_true",
        help="do not show a progress bar (parallel backends never show one)",
    )
    output.add_argument(
        "--info", action="store_true", help="print how the compiled kernel was built and exit"
    )
    return parser


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject inconsistent arguments with an argparse error (exit code 2)."""
    check_run_args(parser, args)
    rmin, rmax = args.range
    if not 0.0 <= rmin < rmax:
        parser.error(f"--range needs 0 <= RMIN < RMAX, got {rmin:g} {rmax:g}")
    if args.coordination and args.plot is None:
        parser.error("--coordination needs --plot FILE")


def cuda_line() -> str:
    """One line on the GPUs this process sees (initialises CUDA when the build has it)."""
    from mdakit_fastrdf.engine import cuda_devices, cuda_unavailable_reason

    why = cuda_unavailable_reason()
    if why is not None:
        return f"none: {why}"
    return "; ".join(
        f"cuda:{d['index']} {d['name']} (sm_{d['compute_capability'][0]}{d['compute_capability'][1]}, "
        f"{d['total_memory'] / 2**30:.0f} GiB, {d['multiprocessors']} SMs)"
        for d in cuda_devices()
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


def _load_universe(args: argparse.Namespace) -> mda.Universe:
    """Return the Universe to analyse, filling in demo defaults when no topology is given."""
    if args.topology is not None:
        files = [args.topology] + ([args.trajectory] if args.trajectory else [])
        return mda.Universe(*files)

    try:
        from MDAnalysisTests.datafiles import TPR, XTC
    except ImportError:
        raise CLIError(
            "no topology given and MDAnalysisTests, which ships the demo data, is not "
            "installed: pass a topology (and trajectory) or `pip install MDAnalysisTests`"
        ) from None
    args.topology, args.trajectory = TPR, XTC
    universe = mda.Universe(TPR, XTC)
    print(
        f"No topology given: using the MDAnalysisTests demo data, adenylate kinase in "
        f"water ({Path(TPR).name}, {Path(XTC).name}, {len(universe.trajectory)} frames)."
    )
    return universe


def peak_line(rdf, args: argparse.Namespace) -> str:
    """The run summary's line on the first peak: with ``--norm rdf``, the first peak of
    :func:`mdakit_fastrdf.first_shell`, the rule that also gives the first shell's minimum;
    otherwise (or without a first shell) the maximum of the curve."""
    res = rdf.results
    shell = None
    if args.norm == "rdf":
        try:
            shell = rdf.first_shell()
        except ValueError:
            pass
    if shell is not None:
        label, r_peak, value = "First peak ", shell.r_peak, shell.g_peak
    else:
        label = "Maximum    "
        k = int(np.argmax(res.rdf))
        r_peak, value = float(res.bins[k]), float(res.rdf[k])
    text = f"{QUANTITY[args.norm]} = {value:.4g}"
    if "rdf_sem" in res:
        k = int(np.argmin(np.abs(res.bins - r_peak)))
        text += f" ± {res.rdf_sem[k]:.2g} (standard error over {args.blocks} blocks)"
    return f"{label}: {text} at r = {r_peak:.3f} Å"


def summary_lines(rdf, args: argparse.Namespace) -> list[str]:
    """The run summary's lines on the densities (``results.rho``) and, with ``--norm rdf``,
    the first coordination shell (:func:`mdakit_fastrdf.first_shell`)."""
    res, lines = rdf.results, []
    if "rho" in res:
        rho1, rho2 = (float(v) for v in res.rho)
        lateral = getattr(args, "lateral", None) is not None
        unit, mean = ("Å⁻²", "N / <A> (in-plane box area)") if lateral else ("Å⁻³", "N / <V>")
        text = f"ρ1 = {rho1:.6g} {unit} ({args.select1!r})"
        if args.select2 != args.select1:
            text += f", ρ2 = {rho2:.6g} {unit} ({args.select2!r})"
        lines.append(f"Density    : {text}, {mean} over the frames")
    if args.norm == "rdf":
        try:
            shell = rdf.first_shell()
        except ValueError as exc:
            lines.append(f"First shell: not found ({str(exc).split(';')[0]})")
        else:
            itself = ("; the atom itself included, its self pair is counted at r = 0"
                      if getattr(args, "self_pairs_counted", False) else "")
            lines.append(f"First shell: minimum at r = {shell.r_min:.3f} Å, "
                         f"coordination number {shell.coordination:.4g} (-s2 atoms around "
                         f"an -s1 atom{itself})")
    return lines


def write_plot(path: Path, rdf, args: argparse.Namespace) -> None:
    """Plot the RDF (:func:`mdakit_fastrdf.plot`) to `path` with matplotlib's Agg backend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from mdakit_fastrdf.outputs.plotting import plot

    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = plot(rdf, fig.add_subplot(), coordination=args.coordination,
              coordination_label="-s2 atoms around an -s1 atom")
    pair = f"-s1 {args.select1!r}  –  -s2 {args.select2!r}"
    title = ax.get_title()  # LateralRDF's plane
    ax.set_title(f"{title}\n{pair}" if title else pair, fontsize="medium")
    fig.savefig(path, dpi=150)


def _default_exclusion(args: argparse.Namespace, g1: mda.AtomGroup, g2: mda.AtomGroup) -> str:
    """Exclude self pairs when both selections are the same atoms (unless told otherwise).

    Sets ``args.exclusion_block`` to ``[1, 1]`` when -s1 and -s2 select the same atoms in the
    same order and neither --exclusion-block, --exclude-same nor --keep-self-pairs is given.
    Returns the line of the summary that says which pairs are left out.
    """
    same = len(g1) == len(g2) and np.array_equal(g1.ix, g2.ix)
    if args.exclude_same is not None:
        return f"pairs within the same {args.exclude_same}"
    if args.exclusion_block is not None:
        a, b = args.exclusion_block
        return f"pairs within blocks of {a} x {b} atoms (--exclusion-block {a} {b})"
    if same and args.finite_size:
        return ("none (--finite-size: each atom with itself is counted at r = 0; g(r) is "
                "normalised by the N(N-1) pairs of distinct atoms)")
    if same and not args.keep_self_pairs:
        args.exclusion_block = [1, 1]
        return ("self pairs (-s1 and -s2 select the same atoms: exclusion block 1 1; "
                "--keep-self-pairs counts them)")
    if same:
        return "none (--keep-self-pairs: each atom with itself is counted at r = 0)"
    shared = int(np.isin(g1.ix, g2.ix).sum())
    if shared:
        first = " in the first frame" if getattr(args, "updating", False) else ""
        return (f"none ({shared} atoms are in both groups{first}: their self pairs are "
                "counted at r = 0)")
    both = np.intersect1d(g1.resindices, g2.resindices).size
    if both and args.compound is None:
        first = " in the first frame" if getattr(args, "updating", False) else ""
        return (f"none ({both} residues hold atoms of both groups{first}: the pairs within a "
                "residue, such as bonds, are counted; --exclude-same residue leaves them out)")
    return "none"


def _check_box(args: argparse.Namespace, universe: mda.Universe) -> None:
    """--norm rdf needs a box: check the first frame to analyse before computing."""
    if args.norm != "rdf":
        return
    from mdakit_fastrdf.engine import NO_BOX, prepare_box

    traj = universe.trajectory
    frames = range(len(traj))[slice(args.start, args.stop, args.step)]
    if len(frames) == 0:
        return  # the analysis reports an empty frame selection itself
    ts = traj[frames[0]]
    try:
        no_box = prepare_box(ts.dimensions).kind == NO_BOX
    except ValueError:
        return  # an invalid box: the analysis reports it
    if no_box:
        source = args.trajectory or args.topology
        raise CLIError(
            f"--norm rdf needs the box volume, but {Path(source).name} has no box (frame "
            f"{ts.frame}: dimensions={ts.dimensions}); use --norm density or --norm none, "
            "or give a topology or trajectory file that stores the box"
        )


def run(args: argparse.Namespace) -> None:
    """Compute the RDF described by parsed command-line `args` and write the outputs."""
    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.engine import available_cpus

    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CLIError("--plot needs matplotlib: `pip install matplotlib`") from None

    universe = _load_universe(args)
    args.select2 = args.select1 if args.select2 is None else args.select2
    g1 = _select(universe, args.select1, args.updating)
    # (the same selection: the same group, so that it stays one group in every frame)
    g2 = g1 if args.select2 == args.select1 else _select(universe, args.select2, args.updating)
    exclusion = _default_exclusion(args, g1, g2)
    args.self_pairs_counted = (args.exclusion_block is None and args.exclude_same is None
                               and args.range[0] == 0.0 and bool(np.isin(g1.ix, g2.ix).any()))
    _check_box(args, universe)

    common = {"nbins": args.nbins, "range": tuple(args.range), "norm": args.norm,
              "exclusion_block": args.exclusion_block, "exclude_same": args.exclude_same,
              "device": args.device, "precision": args.precision, "n_threads": args.n_threads}
    if args.compound is not None:
        common.update(compound=args.compound, center=args.center, unwrap=not args.no_unwrap)
    if args.lateral is not None:
        if args.finite_size:
            raise CLIError("--finite-size cannot be combined with --lateral (LateralRDF "
                           "normalises by N_A N_B pairs; use --exclusion-block 1 1)")
        from mdakit_fastrdf import LateralRDF

        rdf = LateralRDF(g1, g2, normal=args.lateral, slab=args.slab,
                         distance=args.slab_distance, **common)
    elif args.slab is not None or args.slab_distance != "lateral":
        raise CLIError("--slab and --slab-distance need --lateral AXIS (the plane's normal)")
    else:
        rdf = InterRDF(g1, g2, normalization_mode="finite_size" if args.finite_size else "exact",
                       **common)
    n_workers = args.n_workers
    if n_workers is None and args.backend in ("multiprocessing", "dask"):
        n_workers = available_cpus()
    t0 = time.perf_counter()
    rdf.run(
        start=args.start, stop=args.stop, step=args.step,
        verbose=not args.no_progress and args.backend == "serial",
        backend=args.backend, n_workers=n_workers, blocks=args.blocks,
    )
    wall = time.perf_counter() - t0

    n_frames = rdf.n_frames
    rdf.save(args.output, metadata={"select1": args.select1, "select2": args.select2,
                                    "updating": bool(args.updating),
                                    "lateral": args.lateral, "slab": args.slab,
                                    "command": PROG, "wall_s": round(wall, 6)})
    if args.plot is not None:
        write_plot(args.plot, rdf, args)

    res = rdf.results
    if args.updating:  # each frame's sizes: their means over the frames
        n1, n2 = res.frame_group_sizes[:, :2].mean(axis=0)
        sizes = f"{n1:.6g} x {n2:.6g} atoms on average (--updating)"
    elif args.compound is not None:  # centres, not atoms
        n1, n2 = rdf._n_rows
        sizes = f"{n1} x {n2} {args.compound} centres ({args.center})"
    else:
        n1, n2 = len(g1), len(g2)
        sizes = f"{n1} x {n2} atoms"
    rate = n1 * n2 * n_frames / wall if wall > 0 else float("inf")
    print(f"System     : {sizes} ({args.select1!r} x {args.select2!r}), {n_frames} frames")
    print(f"Exclusion  : {exclusion}")
    print(peak_line(rdf, args))
    for line in summary_lines(rdf, args):
        print(line)
    print(f"Run time   : {wall:.3f} s ({args.precision} precision, device {args.device})")
    print(f"Throughput : {rate:.3e} pair distances per second")
    print(f"Results    : {args.output} (read with mdakit_fastrdf.load)")
    if args.plot is not None:
        print(f"Plot       : {args.plot}")


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
    from .commands import commands, main_command

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
    _check_args(parser, args)
    try:
        run(args)
    except Exception as exc:  # noqa: BLE001 - any failure is a message, not a traceback
        message = cli_message(str(exc)) or type(exc).__name__
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1
    return 0
