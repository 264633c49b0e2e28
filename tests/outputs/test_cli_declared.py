"""Every command of mdakit-fastrdf, the main one included, comes from a Command declaration
(mdakit_fastrdf/cli/commands.py): InterRDF declares the main command and LateralRDF a
variant of it (--lateral), and cli/ names no analysis. The hooks they use (two selections,
checks, a builder, metadata, the printed summary, variants) work for any analysis: a
two-group class defined here, outside the package, gets them too."""

import ast
import pathlib

import numpy as np
import pytest

import mdakit_fastrdf
from mdakit_fastrdf.analysis.base import PairHistogramBase, PairLayout
from mdakit_fastrdf.analysis.declarations import (
    Command,
    Field,
    Option,
    OutputSpec,
    Table,
    analysis_classes,
)
from mdakit_fastrdf.cli import main

CLI = pathlib.Path(mdakit_fastrdf.__file__).parent / "cli"


def test_the_main_command_is_declared_by_interrdf_and_lateralrdf():
    from mdakit_fastrdf import InterRDF, LateralRDF
    from mdakit_fastrdf.cli.commands import _declarations, commands, main_analysis

    assert main_analysis() is InterRDF
    assert InterRDF.__dict__["command"].main
    assert LateralRDF.__dict__["command"].switch == "lateral"
    assert [cls for cls, _ in _declarations()["rdf"]] == [InterRDF, LateralRDF]
    assert "rdf" not in commands()  # the main command is not a subcommand


def test_the_command_line_names_no_analysis():
    """No module of cli/ names an analysis class (imports, names, attributes) nor defines
    a run function of its own for one: everything comes from the declarations."""
    classes = set(analysis_classes())
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom))
                     else [node.id] if isinstance(node, ast.Name)
                     else [node.attr] if isinstance(node, ast.Attribute) else [])
            assert not classes & set(names), (path.name, ast.unparse(node))
    app = ast.parse((CLI / "app.py").read_text(encoding="utf-8"))
    functions = {n.name for n in app.body if isinstance(n, ast.FunctionDef)}
    assert functions == {"build_parser", "cuda_line", "format_build_info", "run", "main"}


# --------------------------------------------------------------------------------------
# a two-group analysis with every hook, and a variant of its command
# --------------------------------------------------------------------------------------

def _groups(select, args):
    return select(args.first), select(args.second)


def _validate(args):
    return "--first and --second must differ" if args.first == args.second else None


def _prepare(args, groups):
    if len(groups[0]) > len(groups[1]):
        raise ValueError("the first group must not be larger than the second")
    args.sizes = f"{len(groups[0])} x {len(groups[1])}"


def _report(analysis, args, lines):
    return [("Groups", args.sizes), ("Pairs", f"{analysis.results.n[-1]:.4f} within r_max"),
            ("Results", lines["Results"])]


class PairCount(PairHistogramBase):
    """Running count of second-group atoms around a first-group atom (a test analysis)."""

    coordinates = "wrapped"
    outputs = OutputSpec(
        fields=(Field("bins", "Å", "bin centre"), Field("edges", "Å", "bin edges"),
                Field("count_uint64", "pairs", "pairs in the bin", integer=True),
                Field("n", "atoms", "atoms within r of an atom", blocks=True)),
        tables=(Table(fields=("n", "count_uint64")),),
    )
    command = Command(
        name="test-pairs", help="running pair count of two groups (test)",
        options=(Option(("--first",), "first", {"default": "name OW"}, keyword=False),
                 Option(("--second",), "second", {"default": "name HW1"}, keyword=False),
                 Option(("--nbins",), "nbins", {"type": int})),
        groups=_groups, validate=_validate, prepare=_prepare, report=_report,
        metadata=lambda args: {"first": args.first, "second": args.second},
    )

    def __init__(self, g1, g2, nbins=20, rmax=5.0, **kwargs):
        self._init_histograms(g1.universe, nbins, (0.0, rmax), "none", kwargs=kwargs)
        self.g1, self.g2 = g1, g2

    def _layout(self):
        return PairLayout.of_groups([self.g1, self.g2], [(0, 1)])

    def _normalise(self, res):
        counts = res.count_uint64[0].astype(np.float64)
        res.n = np.cumsum(counts) / (self.n_frames * len(self.g1))


class WidePairCount(PairCount):
    """The same count to a larger r_max: ``test-pairs --wide R``."""

    command = Command(
        name="test-pairs", switch="wide", help="the largest r",
        options=(Option(("--wide",), "wide", {"type": float, "metavar": "R"}, keyword=False),
                 Option(("--scale",), "scale", {"type": float}, keyword=False)),
        build=lambda cls, groups, kwargs, args: cls(*groups, rmax=args.wide, **kwargs),
    )


def test_declared_hooks_run_a_two_group_command(tmp_path, capsys, adk_water):
    from mdakit_fastrdf import load

    out = tmp_path / "p.npz"
    assert main(["test-pairs", "--stop", "2", "--nbins", "10", "--no-progress",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith("Groups  : ") and printed[2].startswith("Pairs   : ")
    assert printed[3].startswith("Results : ")
    data = load(out)
    assert data.parameters["analysis"] == "PairCount"
    assert (data.parameters["first"], data.parameters["second"]) == ("name OW", "name HW1")
    assert data.parameters["command"] == "mdakit-fastrdf test-pairs"

    u = adk_water
    direct = PairCount(u.select_atoms("name OW"), u.select_atoms("name HW1"), nbins=10).run(
        stop=2)
    np.testing.assert_array_equal(data.results.n, direct.results.n)


def test_declared_checks_and_variants(tmp_path, capsys):
    from mdakit_fastrdf import load

    with pytest.raises(SystemExit) as exc:  # validate: a usage error
        main(["test-pairs", "--second", "name OW"])
    assert exc.value.code == 2 and "--first and --second must differ" in capsys.readouterr().err
    # prepare: a message, exit status 1
    assert main(["test-pairs", "--first", "name OW HW1", "--stop", "1", "--no-progress",
                 "-o", str(tmp_path / "x.npz")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mdakit-fastrdf test-pairs: error: the first group must not")
    # a variant's options without its switch
    assert main(["test-pairs", "--scale", "2", "--stop", "1", "--no-progress",
                 "-o", str(tmp_path / "x.npz")]) == 1
    assert "--scale need --wide R (the largest r)" in capsys.readouterr().err
    # the switch runs the variant's class, built by its hook
    out = tmp_path / "w.npz"
    assert main(["test-pairs", "--wide", "7", "--stop", "1", "--no-progress",
                 "-o", str(out)]) == 0
    data = load(out)
    assert data.parameters["analysis"] == "WidePairCount"
    assert tuple(data.parameters["range"]) == (0.0, 7.0)
