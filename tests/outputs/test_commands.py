"""Subcommands of mdakit-fastrdf built from an analysis' Command declaration
(mdakit_fastrdf/cli/commands.py): a class defined here, outside the package, gets a
working subcommand; its results equal running the class directly, which equals
MDAnalysis's InterRDF counts."""

import re

import numpy as np
import pytest
from conftest import datafile, load_universe

from mdakit_fastrdf.analysis.base import PairHistogramBase, PairLayout
from mdakit_fastrdf.analysis.declarations import (
    Command,
    Field,
    Option,
    OutputSpec,
    Table,
)
from mdakit_fastrdf.cli import main


def _summary(analysis):
    return [("Neighbours", f"{analysis.results.n[-1]:.4f} within r_max")]


class NeighbourCount(PairHistogramBase):
    """Running count of other atoms of the group around an atom (a test analysis)."""

    coordinates = "wrapped"
    outputs = OutputSpec(
        fields=(Field("bins", "Å", "bin centre"), Field("edges", "Å", "bin edges"),
                Field("count_uint64", "pairs", "pairs in the bin", integer=True),
                Field("n", "atoms", "atoms within r of an atom", blocks=True)),
        tables=(Table(fields=("n", "count_uint64")),),
    )
    command = Command(
        name="test-neighbours", help="running neighbour count (test)", select="name OW",
        options=(Option(("--nbins",), "nbins", {"type": int, "help": "bins"}),
                 Option(("--rmax",), "rmax", {"type": float, "help": "largest r"})),
        summary=_summary,
    )

    def __init__(self, atomgroup, nbins=30, rmax=6.0, **kwargs):
        self._init_histograms(atomgroup.universe, nbins, (0.0, rmax), "none", kwargs=kwargs)
        self.atomgroup = atomgroup

    def _layout(self):
        return PairLayout.of_groups([self.atomgroup], [(0, 0)])

    def _normalise(self, res):
        counts = res.count_uint64[0].astype(np.float64)
        counts[0] -= self.n_frames * len(self.atomgroup)  # the self pairs at r = 0
        res.n = np.cumsum(counts) / (self.n_frames * len(self.atomgroup))


class Child(NeighbourCount):
    """Inherits the parent's command declaration but declares none of its own."""


def test_subcommand_runs_and_matches_the_class_and_mdanalysis(tmp_path, capsys, adk_water):
    from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

    from mdakit_fastrdf import load

    out = tmp_path / "n.npz"
    rc = main(["test-neighbours", "--stop", "3", "--nbins", "20", "--rmax", "5",
               "--no-progress", "-o", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    assert "Neighbours" in printed and "demo data" in printed
    data = load(out)

    u = adk_water
    ow = u.select_atoms("name OW")
    direct = NeighbourCount(ow, nbins=20, rmax=5.0).run(stop=3)
    np.testing.assert_array_equal(data.results.n, direct.results.n)

    ref = MDAInterRDF(ow, ow, nbins=20, range=(0.0, 5.0), exclusion_block=(1, 1)).run(stop=3)
    np.testing.assert_allclose(direct.results.n, np.cumsum(ref.results.count) / (3 * len(ow)),
                               rtol=0, atol=1e-12)


def test_subcommands_are_listed_once_per_declaring_class(capsys):
    from mdakit_fastrdf.cli.commands import commands

    found = commands()
    assert found["test-neighbours"] is NeighbourCount  # not Child: declarations not inherited
    with pytest.raises(SystemExit):
        main(["--help"])
    # (argparse may wrap the epilog after the hyphen of a name)
    assert "test-neighbours" in re.sub(r"-\n\s*", "-", capsys.readouterr().out)


def test_subcommand_bad_input_is_a_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["test-neighbours", "--nbins", "x"])
    assert exc.value.code == 2
    assert "invalid int value" in capsys.readouterr().err
    rc = main(["test-neighbours", "--stop", "1", "--nbins", "-3", "--no-progress",
               "-o", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("mdakit-fastrdf test-neighbours: error:") and "nbins" in err
    with pytest.raises(SystemExit):
        main(["test-neighbours", "--select", "name OW", "-o", str(tmp_path / "x.txt")])
    assert "--output must end in" in capsys.readouterr().err


def test_debye_subcommand_writes_its_q_tables(tmp_path, capsys, fresh_adk_vacuum):
    """mdakit-fastrdf debye on the demo protein: the CSV's q tables (Table axis 'q') read
    back to the numbers of DebyeScattering run directly on the same frames."""
    from mdakit_fastrdf import DebyeScattering, load

    u = fresh_adk_vacuum  # its own: elements are guessed onto it

    out = tmp_path / "saxs.csv"
    rc = main(["debye", "--stop", "2", "--q", "0.05", "0.5", "10", "--no-progress",
               "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert "Binning" in capsys.readouterr().out
    header = out.read_text(encoding="utf-8").splitlines()[2].split(",")
    assert "q" in header and "intensity" in header and "partials_H_H" in header
    assert "r_angstrom" not in header  # the histograms are in saxs_histogram.csv
    assert (tmp_path / "saxs_histogram.csv").exists()

    u.guess_TopologyAttrs(to_guess=["elements"])
    direct = DebyeScattering(u.atoms, q=np.linspace(0.05, 0.5, 10)).run(stop=2)
    data = load(out)
    for name in ("q", "intensity", "partials", "pair_sums", "count_uint64"):
        np.testing.assert_array_equal(data.results[name], direct.results[name], err_msg=name)
    np.testing.assert_array_equal(data.results.bins, direct.results.bins)
    np.testing.assert_array_equal(data.results.edges, direct.results.edges)


def test_debye_subcommand_q_grid_errors(tmp_path, capsys):
    datafile("PSF", "DCD")  # the command's default files: skips where they were not carried
    rc = main(["debye", "--stop", "1", "--q", "0.1", "0.5", "2.5", "--no-progress",
               "-o", str(tmp_path / "x.npz")])
    assert rc == 1 and "N must be a positive integer" in capsys.readouterr().err


def test_sq_subcommand_writes_its_q_tables(tmp_path, capsys, adk_water):
    """mdakit-fastrdf sq on the demo water: the CSV's q tables read back to the numbers of
    StructureFactor run directly on the same frames and options."""
    from mdakit_fastrdf import StructureFactor, load

    out = tmp_path / "sq.csv"
    rc = main(["sq", "--stop", "2", "--nbins", "400", "--range", "0", "10", "--qbins", "30",
               "--q-range", "0", "6", "--no-progress", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert "Main peak" in capsys.readouterr().out
    u = adk_water
    direct = StructureFactor(u.select_atoms("name OW"), nbins=400, range=(0.0, 10.0),
                             qbins=30, q_range=(0.0, 6.0)).run(stop=2)
    data = load(out)
    for name in ("q", "s", "f", "partials", "partials_transform", "count_uint64"):
        np.testing.assert_array_equal(data.results[name], direct.results[name], err_msg=name)


@pytest.mark.parametrize("name", ["isf", "vanhove"])
def test_dynamics_subcommands_give_the_classes_numbers(tmp_path, capsys, name):
    """mdakit-fastrdf isf / vanhove on the demo water (frames 1 ps apart, a constant box):
    the saved file reads back to the numbers of the class run directly."""
    from mdakit_fastrdf import IntermediateScattering, VanHove, load

    u = load_universe("PRMpbc", "TRJpbc_bz2")  # skips where the data files were not carried
    u.guess_TopologyAttrs(to_guess=["elements"])
    water = u.select_atoms("resname WAT and name O")
    out = tmp_path / f"{name}.npz"
    if name == "isf":
        args = ["--q", "1.0", "2.5", "--lags", "4", "--weights", "xray"]
        direct = IntermediateScattering(water, q=[1.0, 2.5], lags=4, weights="xray").run()
        fields = ("f_self_total", "f_total", "f_coherent", "times", "q")
    else:
        args = ["--lags", "3", "--range", "0", "8", "--nbins", "40", "--origins", "2"]
        direct = VanHove(water, lags=3, range=(0.0, 8.0), nbins=40, origins=2).run()
        fields = ("g_distinct", "count_distinct", "g_self", "g_self_total", "bins")
    rc = main([name, *args, "--no-progress", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert "1,683 waters" in capsys.readouterr().out
    data = load(out)
    for field in fields:
        np.testing.assert_array_equal(data.results[field], direct.results[field], err_msg=field)
    rc = main([name, "--lags", "11", "--no-progress", "-o", str(tmp_path / "x.npz")])
    assert rc == 1 and "largest lag allowed is 10" in capsys.readouterr().err
