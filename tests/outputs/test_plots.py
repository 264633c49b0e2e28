"""The default plots as figures (issue 38, items 7 and 9): limits chosen from the data, the
legend naming every line, titles and axis labels that say what is drawn.

Each test writes its PNG to ``tmp_path``; ``docs/gallery/make_default_plots.py`` makes the
same figures for the docs' gallery.
"""

import warnings

import numpy as np
import pytest
from conftest import datafile, load_universe

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from mdakit_fastrdf import InterRDF, LateralRDF, StructureFactor, plot  # noqa: E402
from mdakit_fastrdf.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def adk():
    """A Universe of its own, not the shared ``adk_water``: elements are guessed onto it."""
    u = load_universe("TPR", "XTC")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u.guess_TopologyAttrs(to_guess=["elements"])
    return u


@pytest.fixture
def saved_figures(monkeypatch):
    """The Figures the command line saves (it builds them itself)."""
    figures = []
    savefig = Figure.savefig

    def capture(self, *args, **kwargs):
        figures.append(self)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", capture)
    return figures


def _save(ax, path):
    ax.figure.savefig(path, dpi=100)
    assert path.read_bytes().startswith(b"\x89PNG")


# -- item 7: S(q) of a solvated system -----------------------------------------------------


@pytest.fixture(scope="module")
def water_sq(adk):
    water = adk.select_atoms("resname SOL and not name MW")
    return StructureFactor(water, weights="xray", nbins=600, range=(0.0, 12.0),
                           qbins=120, q_range=(0.0, 10.0)).run(stop=2)


def test_sq_y_limits_follow_the_liquid_not_the_cavity(water_sq, tmp_path):
    """The protein's cavity makes S(q) rise to ~80 below 0.3 1/Å; the y axis shows the
    water's peaks (S within about -1..3 above 2π/r_max) and says what is off scale."""
    s = water_sq.results.s
    assert np.nanmax(s) > 20  # the cavity's rise is in the data
    ax = plot(water_sq)
    _save(ax, tmp_path / "sq.png")
    lo, hi = ax.get_ylim()
    q = water_sq.results.q
    liquid = s[q > 2 * np.pi / 12.0]
    assert hi < 5 and lo > -3, (lo, hi)
    assert lo <= np.nanmin(liquid) and hi >= np.nanmax(liquid)
    off = [t.get_text() for t in ax.texts if "off scale" in t.get_text()]
    assert off and "S(q)" in off[0], [t.get_text() for t in ax.texts]


def test_sq_summary_prints_no_nan(tmp_path, capsys, saved_figures):
    tpr, xtc = datafile("TPR", "XTC")
    png = tmp_path / "sq.png"
    rc = main(["sq", tpr, xtc, "--select", "resname SOL and not name MW", "--weights", "xray",
               "--guess-elements", "--stop", "2", "--nbins", "600", "--range", "0", "12",
               "--qbins", "120", "--no-progress", "-o", str(tmp_path / "sq.csv"),
               "--plot", str(png)])
    out = capsys.readouterr().out
    assert rc == 0, out
    import re

    (peak,) = [line for line in out.splitlines() if line.startswith("Main peak")]
    assert not re.search(r"\bnan\b", peak, re.IGNORECASE), peak
    (fig,) = saved_figures
    lo, hi = fig.axes[0].get_ylim()
    assert hi < 5, (lo, hi)


# -- item 9: the RDF plots -------------------------------------------------------------------


@pytest.fixture(scope="module")
def water_oo(adk):
    ow = adk.select_atoms("name OW")
    return InterRDF(ow, ow, nbins=150, range=(0.0, 15.0),
                    exclusion_block=(1, 1)).run(stop=4, blocks=2)


def test_coordination_axis_stops_at_the_second_shell(water_oo, tmp_path):
    """n(r) grows as r³ (about 450 at 15 Å); the right axis ends near n at the second
    minimum of g(r) (about 20 in water) so the first shell's ~4.5 can be read."""
    ax = plot(water_oo, coordination=True)
    _save(ax, tmp_path / "rdf_coordination.png")
    twin = ax.figure.axes[-1]
    n_end = water_oo.results.coordination[-1]
    assert n_end > 300
    lo, hi = twin.get_ylim()
    assert lo == 0 and 10 < hi < 40, (lo, hi)


def test_legend_shows_the_curve_and_the_band(water_oo, tmp_path):
    ax = plot(water_oo, coordination=True)
    _save(ax, tmp_path / "rdf_legend.png")
    legend = ax.get_legend()
    assert legend is not None
    lines = [h for h in legend.legend_handles if isinstance(h, Line2D)]
    texts = [t.get_text() for t in legend.get_texts()]
    assert any(h.get_linestyle() == "-" for h in lines), texts  # the g(r) curve
    assert any(h.get_linestyle() == "--" for h in lines), texts  # the n(r) curve
    assert any("standard error" in t for t in texts), texts


def test_lateral_plot_has_a_title_and_says_in_plane(adk, tmp_path):
    ow = adk.select_atoms("name OW")
    lat = LateralRDF(ow, ow, nbins=60, range=(0.0, 12.0), exclusion_block=(1, 1)).run(stop=1)
    ax = lat.plot()
    _save(ax, tmp_path / "lateral.png")
    assert "in-plane" in ax.get_title() or "lateral" in ax.get_title().lower()
    assert "r_{xy}" in ax.get_xlabel() or "r_xy" in ax.get_xlabel(), ax.get_xlabel()
    assert "in-plane" in ax.get_xlabel()


def test_cli_plot_labels_name_the_flags(tmp_path, saved_figures):
    """The CLI's groups are -s1/-s2: no label of its plot says g1/g2."""
    tpr, xtc = datafile("TPR", "XTC")
    png = tmp_path / "cli_rdf.png"
    rc = main([tpr, xtc, "-s1", "name OW", "-s2", "name OW", "--range", "0", "10", "--nbins",
               "100", "--stop", "2", "--no-progress", "-o", str(tmp_path / "rdf.csv"),
               "--plot", str(png), "--coordination"])
    assert rc == 0
    (fig,) = saved_figures
    labels = [a.get_ylabel() for a in fig.axes] + [a.get_xlabel() for a in fig.axes]
    text = " ".join(labels)
    assert "g1" not in text and "g2" not in text, labels
    assert "-s2" in fig.axes[-1].get_ylabel() and "-s1" in fig.axes[-1].get_ylabel(), labels


def test_python_plot_labels_are_neutral(water_oo):
    ax = plot(water_oo, coordination=True)
    label = ax.figure.axes[-1].get_ylabel()
    assert "g1" not in label and "g2" not in label, label
