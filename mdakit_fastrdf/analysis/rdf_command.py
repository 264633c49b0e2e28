"""The command-line declarations of :class:`~mdakit_fastrdf.InterRDF` (the main command of
``mdakit-fastrdf``) and :class:`~mdakit_fastrdf.LateralRDF` (its variant, ``--lateral``):
their options and the hooks of :class:`~.declarations.Command` that the command line calls
(selections, checks, metadata, plot and printed summary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .declarations import Command, Option, positive_int

__all__ = ["LATERAL_COMMAND", "RDF_COMMAND"]

QUANTITY = {"rdf": "g(r)", "density": "ρ(r)", "none": "n(r)"}

_SEL = "selections and histogram"


def _groups(select, args):
    """-s1 and -s2 (the same group when -s2 is not given or is the same selection)."""
    args.select2 = args.select1 if args.select2 is None else args.select2
    g1 = select(args.select1, updating=args.updating)
    # (the same selection: the same group, so that it stays one group in every frame)
    g2 = g1 if args.select2 == args.select1 else select(args.select2, updating=args.updating)
    return g1, g2


def _validate(args) -> str | None:
    rmin, rmax = args.range
    if not 0.0 <= rmin < rmax:
        return f"--range needs 0 <= RMIN < RMAX, got {rmin:g} {rmax:g}"
    if args.coordination and args.plot is None:
        return "--coordination needs --plot FILE"
    return None


def _default_exclusion(args, g1, g2) -> str:
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
    if same and args.normalization_mode:
        return ("none (--finite-size: each atom with itself is counted at r = 0; g(r) is "
                "normalised by the N(N-1) pairs of distinct atoms)")
    if same and not args.keep_self_pairs:
        args.exclusion_block = [1, 1]
        return ("self pairs (-s1 and -s2 select the same atoms: exclusion block 1 1; "
                "--keep-self-pairs counts them)")
    if same:
        return "none (--keep-self-pairs: each atom with itself is counted at r = 0)"
    first = " in the first frame" if args.updating else ""
    shared = int(np.isin(g1.ix, g2.ix).sum())
    if shared:
        return (f"none ({shared} atoms are in both groups{first}: their self pairs are "
                "counted at r = 0)")
    both = np.intersect1d(g1.resindices, g2.resindices).size
    if both and args.compound is None:
        return (f"none ({both} residues hold atoms of both groups{first}: the pairs within a "
                "residue, such as bonds, are counted; --exclude-same residue leaves them out)")
    return "none"


def _check_box(args, universe) -> None:
    """--norm rdf needs a box: check the first frame to analyse before computing."""
    if args.norm != "rdf":
        return
    from ..engine import NO_BOX, prepare_box

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
        raise ValueError(
            f"--norm rdf needs the box volume, but {Path(source).name} has no box (frame "
            f"{ts.frame}: dimensions={ts.dimensions}); use --norm density or --norm none, "
            "or give a topology or trajectory file that stores the box"
        )


def _prepare(args, groups) -> None:
    """The default exclusion (and its summary line), whether self pairs are counted, and
    the box that --norm rdf needs."""
    g1, g2 = groups
    args.exclusion = _default_exclusion(args, g1, g2)
    args.self_pairs_counted = (args.exclusion_block is None and args.exclude_same is None
                               and args.range[0] == 0.0 and bool(np.isin(g1.ix, g2.ix).any()))
    _check_box(args, g1.universe)


def _build(cls, groups, kwargs, args):
    """Centres of compounds: --center and --no-unwrap only with --compound."""
    if args.compound is None:
        kwargs.pop("center", None)
        kwargs.pop("unwrap", None)
    return cls(*groups, **kwargs)


def _metadata(args) -> dict:
    return {"select1": args.select1, "select2": args.select2,
            "updating": bool(args.updating), "lateral": args.lateral, "slab": args.slab}


def _plot(analysis, ax, args) -> None:
    analysis.plot(ax, coordination=args.coordination,
                  coordination_label="-s2 atoms around an -s1 atom")
    pair = f"-s1 {args.select1!r}  –  -s2 {args.select2!r}"
    title = ax.get_title()  # LateralRDF's plane
    ax.set_title(f"{title}\n{pair}" if title else pair, fontsize="medium")


def peak_line(rdf, args) -> tuple:
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
        label, r_peak, value = "First peak", shell.r_peak, shell.g_peak
    else:
        label = "Maximum"
        k = int(np.argmax(res.rdf))
        r_peak, value = float(res.bins[k]), float(res.rdf[k])
    text = f"{QUANTITY[args.norm]} = {value:.4g}"
    if "rdf_sem" in res:
        k = int(np.argmin(np.abs(res.bins - r_peak)))
        text += f" ± {res.rdf_sem[k]:.2g} (standard error over {args.blocks} blocks)"
    return label, f"{text} at r = {r_peak:.3f} Å"


def summary_lines(rdf, args) -> list:
    """The run summary's lines on the densities (``results.rho``) and, with ``--norm rdf``,
    the first coordination shell (:func:`mdakit_fastrdf.first_shell`)."""
    res, lines = rdf.results, []
    if "rho" in res:
        rho1, rho2 = (float(v) for v in res.rho)
        lateral = args.lateral is not None
        unit, mean = ("Å⁻²", "N / <A> (in-plane box area)") if lateral else ("Å⁻³", "N / <V>")
        text = f"ρ1 = {rho1:.6g} {unit} ({args.select1!r})"
        if args.select2 != args.select1:
            text += f", ρ2 = {rho2:.6g} {unit} ({args.select2!r})"
        lines.append(("Density", f"{text}, {mean} over the frames"))
    if args.norm == "rdf":
        try:
            shell = rdf.first_shell()
        except ValueError as exc:
            lines.append(("First shell", f"not found ({str(exc).split(';')[0]})"))
        else:
            itself = ("; the atom itself included, its self pair is counted at r = 0"
                      if args.self_pairs_counted else "")
            text = (f"minimum at r = {shell.r_min:.3f} Å, coordination number "
                    f"{shell.coordination:.4g} (-s2 atoms around an -s1 atom{itself})")
            lines.append(("First shell", text))
    return lines


def _report(rdf, args, lines) -> list:
    res = rdf.results
    if args.updating:  # each frame's sizes: their means over the frames
        n1, n2 = res.frame_group_sizes[:, :2].mean(axis=0)
        sizes = f"{n1:.6g} x {n2:.6g} atoms on average (--updating)"
    elif args.compound is not None:  # centres, not atoms
        n1, n2 = (int(n) for n in rdf._n_rows)
        sizes = f"{n1} x {n2} {args.compound} centres ({args.center})"
    else:
        n1, n2 = len(rdf.g1), len(rdf.g2)
        sizes = f"{n1} x {n2} atoms"
    wall = args.wall_s
    rate = n1 * n2 * rdf.n_frames / wall if wall > 0 else float("inf")
    out = [("System", f"{sizes} ({args.select1!r} x {args.select2!r}), {rdf.n_frames} frames"),
           ("Exclusion", args.exclusion), peak_line(rdf, args), *summary_lines(rdf, args),
           ("Run time", lines["Run time"]),
           ("Throughput", f"{rate:.3e} pair distances per second"),
           ("Results", f"{args.output} (read with mdakit_fastrdf.load)")]
    if "Plot" in lines:
        out.append(("Plot", lines["Plot"]))
    return out


RDF_COMMAND = Command(
    name="rdf",
    main=True,
    help="radial distribution function g(r) between two atom selections (InterRDF)",
    description=(
        "Radial distribution function g(r) between two atom selections, "
        "computed with the compiled kernel of mdakit_fastrdf. Without a "
        "topology, the adenylate kinase in water demo system of "
        "MDAnalysisTests is used (water oxygen-oxygen g(r))."
    ),
    demo_about="adenylate kinase in water",
    options=(
        Option(("-s1", "--select1"), "select1", {
            "default": "name OW",
            "help": "selection of the first group (default: %(default)r)"},
            group=_SEL, keyword=False),
        Option(("-s2", "--select2"), "select2", {
            "help": "selection of the second group (default: same as --select1)"},
            group=_SEL, keyword=False),
        Option(("--updating",), "updating", {
            "action": "store_true",
            "help": "evaluate -s1 and -s2 again in every frame (UpdatingAtomGroups, e.g. "
                    "'name OW and around 6 protein'); the normalisation takes each frame's "
                    "group sizes"},
            group=_SEL, keyword=False),
        Option(("--nbins",), "nbins", {
            "type": positive_int, "default": 75,
            "help": "number of bins (default: %(default)s)"}, group=_SEL),
        Option(("--range",), "range", {
            "nargs": 2, "type": float, "default": (0.0, 15.0), "metavar": ("RMIN", "RMAX"),
            "help": "distance range in Å (default: 0 15)"}, convert=tuple, group=_SEL),
        Option(("--norm",), "norm", {
            "choices": ("rdf", "density", "none"), "default": "rdf",
            "help": "normalisation, as in MDAnalysis InterRDF (default: %(default)s)"},
            group=_SEL),
        Option(("--finite-size",), "normalization_mode", {
            "action": "store_true",
            "help": "normalise g(r) of a selection with itself by its N(N-1) pairs of "
                    "distinct atoms, so that it tends to 1 in a small system (freud's "
                    "finite_size normalization_mode; needs --norm rdf and -s2 selecting the "
                    "same atoms as -s1). Self pairs are then counted at r = 0 instead of "
                    "excluded"},
            convert=lambda on: "finite_size", group=_SEL),
        Option(("--compound",), "compound", {
            "choices": ("group", "residues", "segments", "molecules", "fragments"),
            "help": "the RDF between the centres of these compounds of -s1 and -s2 instead "
                    "of their atoms (InterRDF's compound=; --center chooses the centre)"},
            group=_SEL),
        Option(("--center",), "center", {
            "choices": ("geometry", "mass"), "default": "geometry",
            "help": "with --compound: centre of geometry (default) or of mass"}, group=_SEL),
        Option(("--no-unwrap",), "unwrap", {
            "action": "store_false",
            "help": "with --compound: take the positions as they are (molecules whole in "
                    "the trajectory) instead of making each compound whole along its bonds"},
            group=_SEL),
        Option(("--exclusion-block",), "exclusion_block", {
            "nargs": 2, "type": positive_int, "metavar": ("A", "B"),
            "help": "ignore pairs within blocks of A x B atoms (1 1 drops self pairs). "
                    "Default: when -s1 and -s2 select the same atoms, 1 1 (self pairs, at "
                    "r = 0, are not counted; see --keep-self-pairs), otherwise none"},
            group=_SEL, exclusive="exclusion"),
        Option(("--exclude-same",), "exclude_same", {
            "choices": ("residue", "segment", "chain"),
            "help": "ignore pairs within the same residue, segment or chain"},
            group=_SEL, exclusive="exclusion"),
        Option(("--keep-self-pairs",), "keep_self_pairs", {
            "action": "store_true",
            "help": "when -s1 and -s2 select the same atoms, count each atom with itself "
                    "too (distance 0, in the first bin) instead of excluding self pairs"},
            group=_SEL, exclusive="exclusion", keyword=False),
        Option(("--coordination",), "coordination", {
            "action": "store_true",
            "help": "with --plot: also draw the running coordination number"},
            group="output", keyword=False),
    ),
    common_help={
        "device": "device running the kernel: auto, cpu, cuda or cuda:N (default: "
                  "%(default)s)",
        "precision": "floating-point precision of the distances; double (the default) "
                     "reproduces MDAnalysis's counts exactly, single may move a pair within "
                     "float32 rounding of a bin edge into the next bin (default: %(default)s)",
        "n_threads": "CPU threads per process (default: all cores, shared among the "
                     "workers)",
        "backend": "parallel backend splitting the frames over processes: serial, "
                   "multiprocessing or dask (MDAnalysis's), or node (every GPU and CPU "
                   "socket of this machine) (default: %(default)s)",
        "n_workers": "number of workers of a parallel backend (default for multiprocessing "
                     "and dask: the number of cores this process may use)",
        "blocks": "also compute the RDF of N consecutive blocks of frames and write the "
                  "standard error of the mean over the blocks (rdf_sem) and the per-block "
                  "results",
        "output": "output file with the results and the parameters of the run: .csv (table "
                  "with a header naming columns and units), .npz, or .h5/.hdf5 (needs h5py) "
                  "(default: %(default)s)",
        "plot": "also plot g(r) to FILE, in the format its suffix names (e.g. rdf.png, "
                "rdf.pdf, rdf.svg; needs matplotlib)",
        "no_progress": "do not show a progress bar (parallel backends never show one)",
    },
    groups=_groups,
    validate=_validate,
    prepare=_prepare,
    build=_build,
    metadata=_metadata,
    plot=_plot,
    report=_report,
    summary_format="{label:<11}: {text}",
)


def _prepare_lateral(args, groups) -> None:
    if args.normalization_mode:
        raise ValueError("--finite-size cannot be combined with --lateral (LateralRDF "
                         "normalises by N_A N_B pairs; use --exclusion-block 1 1)")


def _build_lateral(cls, groups, kwargs, args):
    kwargs.update(normal=args.lateral, slab=args.slab, distance=args.slab_distance)
    return _build(cls, groups, kwargs, args)


LATERAL_COMMAND = Command(
    name="rdf",
    switch="lateral",
    help="the plane's normal",
    options=(
        Option(("--lateral",), "lateral", {
            "choices": ("x", "y", "z"), "metavar": "AXIS",
            "help": "a lateral (2D) RDF in the plane normal to AXIS (x, y or z; "
                    "LateralRDF): in-plane distances, ring areas and the in-plane box area "
                    "in the normalisation, as gmx rdf -xy for z"},
            group=_SEL, keyword=False),
        Option(("--slab",), "slab", {
            "type": float, "metavar": "H",
            "help": "with --lateral: only the pairs whose separation along the normal is at "
                    "most H Å (a slab of thickness 2H around each atom; maicos PDFPlanar's "
                    "dzheight)"},
            group=_SEL, keyword=False),
        Option(("--slab-distance",), "slab_distance", {
            "choices": ("lateral", "3d"), "default": "lateral",
            "help": "with --slab: bin the in-plane distance (default) or the 3D distance "
                    "(maicos PDFPlanar's)"},
            group=_SEL, keyword=False),
    ),
    prepare=_prepare_lateral,
    build=_build_lateral,
)
