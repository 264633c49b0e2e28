"""Save -> load -> plot round trips for every analysis and format (the user-visible steps
of the outputs), the stored parameters, and the CSV layout."""

import json

import numpy as np
import pytest

import mdakit_fastrdf
from mdakit_fastrdf import InterRDF, InterRDF_s, RDFData, SpeciesRDF, load, save

from conftest import load_universe

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

FORMATS = ["npz", "csv", "h5"]


def same(a, b):
    """Equal values and types, recursively (arrays: same dtype and values)."""
    if isinstance(a, (list, tuple)):
        return (isinstance(b, type(a)) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b)))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (float, np.floating)):
        return float(a) == float(b)
    return a == b


def assert_same_results(res, loaded):
    assert set(res) == set(loaded)
    for key, value in res.items():
        assert same(value, loaded[key]), key


def skip_without_h5py(fmt):
    if fmt == "h5":
        pytest.importorskip("h5py")


@pytest.fixture(scope="module")
def interrdf(adk_water):
    ow = adk_water.select_atoms("name OW")[:1500]
    return InterRDF(ow, ow, nbins=40, range=(0.0, 10.0), exclusion_block=(1, 1)).run(
        stop=4, blocks=2)


@pytest.fixture(scope="module")
def species(adk_water):
    sel = adk_water.select_atoms("resname SOL and index 20000:23000 or resname NA+")
    return SpeciesRDF(sel, by="element", nbins=30, range=(0.0, 8.0),
                      exclude_same="residue").run(stop=3)


@pytest.fixture(scope="module")
def sites():
    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    s1 = u.select_atoms("name ZND and resid 289")
    s2 = u.select_atoms("(name OD1 or name OD2) and resid 51 and sphzone 5.0 (resid 289)")
    s3 = u.select_atoms("name ZND and (resid 291 or resid 292)")
    s4 = u.select_atoms("(name OD1 or name OD2) and sphzone 5.0 (resid 291)")
    with pytest.warns(DeprecationWarning):
        rdf = InterRDF_s(u, [[s1, s2], [s3, s4]], precision="double")
    rdf.run(blocks=2)
    rdf.get_cdf()
    return rdf


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("which", ["interrdf", "species", "sites"])
def test_save_load_plot_round_trip(which, fmt, request, tmp_path):
    skip_without_h5py(fmt)
    analysis = request.getfixturevalue(which)
    path = analysis.save(tmp_path / f"out.{fmt}", metadata={"note": "round trip"})
    data = load(path)
    assert isinstance(data, RDFData)
    assert data.analysis == type(analysis).__name__
    assert_same_results(analysis.results, data.results)
    np.testing.assert_array_equal(data.frames, analysis.frames)
    if fmt != "csv" or len(analysis.times):
        np.testing.assert_array_equal(data.times, analysis.times)
    expected = analysis.parameters()
    for key in ("analysis", "version", "nbins", "range", "norm", "device", "precision",
                "method", "n_frames", "frames", "blocks", "backend"):
        assert data.parameters[key] == expected[key], key
    assert data.parameters["note"] == "round trip"
    ax = data.plot(coordination=True)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert len(ax.lines) >= 1
    # and written again (conversion between formats) without loss
    again = load(data.save(tmp_path / "again.npz"))
    assert_same_results(analysis.results, again.results)
    matplotlib.pyplot.close("all")


def test_parameters_of_the_run(interrdf, adk_water):
    p = interrdf.parameters()
    assert p["analysis"] == "InterRDF"
    assert p["version"] == mdakit_fastrdf.__version__
    assert p["nbins"] == 40 and p["range"] == [0.0, 10.0] and p["norm"] == "rdf"
    assert p["exclusion_block"] == [1, 1] and p["exclude_same"] is None
    assert p["precision"] == "double" and p["device"] == "auto"
    assert p["device_used"] == interrdf._engine.device_used  # 'cpu', or a GPU where there is one
    assert p["device_used"] in ("cpu", "cuda:0")
    assert p["n_frames"] == 4 and p["frames"] == [0, 1, 2, 3]
    assert p["stop"] == 4 and p["blocks"] == 2 and p["backend"] == "serial"
    assert p["n_atoms1"] == p["n_atoms2"] == 1500
    assert p["topology"] == adk_water.filename
    json.dumps(p)  # JSON-serialisable


def test_csv_header_names_columns_and_units(interrdf, tmp_path):
    path = interrdf.save(tmp_path / "rdf.csv")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0][len("# mdakit-fastrdf "):])
    assert header["analysis"] == "InterRDF"
    assert header["parameters"]["nbins"] == 40
    assert lines[1].startswith("# columns: ")
    for unit in ("bin centre (Å)", "g(r) (dimensionless)", "standard error"):
        assert unit in lines[1]
    names = lines[2].split(",")
    assert names[:8] == ["r_angstrom", "r_lo_angstrom", "r_hi_angstrom", "rdf", "count",
                         "cdf", "coordination", "rdf_sem"]
    assert "count_block_1" in names and "rdf_block_1" in names
    table = np.genfromtxt(path, delimiter=",", names=True, skip_header=2)
    np.testing.assert_array_equal(table["rdf"], interrdf.results.rdf)
    np.testing.assert_array_equal(table["count"], interrdf.results.count)


def test_species_csv_has_one_row_per_pair_and_bin(species, tmp_path):
    path = species.save(tmp_path / "species.csv")
    rows = [line for line in path.read_text(encoding="utf-8").splitlines()
            if not line.startswith("#")][1:]
    n_pairs = len(species.results.pairs)
    total = 30 if "total_rdf" in species.results else 0
    assert len(rows) == n_pairs * 30 + total
    data = load(path)
    oh = data.partial("O", "H")
    np.testing.assert_array_equal(oh.rdf, species.partial("O", "H").rdf)


def test_plot_helpers(interrdf, species, sites):
    ax = interrdf.plot(label="O–O")
    assert ax.get_xlabel() == "r (Å)" and ax.get_ylabel() == "g(r)"
    assert len(ax.collections) == 1  # the ±SEM band of the blocks
    ax = species.plot(pairs=[("O", "H"), ("O", "O")], total=True, coordination=True)
    assert [line.get_label() for line in ax.lines[:3]] == ["O–H", "O–O", "total"]
    ax = mdakit_fastrdf.plot(sites, sites=[(0, 0, 1), (1, 1, 0)])
    labels = [line.get_label() for line in ax.lines]
    i01 = sites.results.indices[0]
    assert f"ags[0]: atom {i01[0][0]} – atom {i01[1][1]}" in labels
    assert len([t for t in labels if t.startswith(("ags[0]:", "ags[1]:"))]) == 2
    matplotlib.pyplot.close("all")


def test_plot_says_what_is_drawn(interrdf, species, sites):
    """The coordination axis names what is counted around what; the error band has a
    legend entry; SpeciesRDF's default plot leaves out the self-pair bin at r = 0."""
    ax = interrdf.plot(coordination=True)
    assert "second group's atoms around an atom of the first" in ax.figure.axes[-1].get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "± standard error (blocks)" in legend
    sel = species.atomgroup
    with_self = SpeciesRDF(sel, by="element", nbins=30, range=(0.0, 8.0)).run(stop=1)
    ax = with_self.plot()
    o_o = with_self.partial("O", "O")
    line = next(line for line in ax.lines if line.get_label() == "O–O")
    y = line.get_ydata()
    assert o_o.rdf[0] > 10 * np.nanmax(y)  # the spike of the self pairs is in the results
    assert np.isnan(y[0]) and np.array_equal(y[1:], o_o.rdf[1:])
    matplotlib.pyplot.close("all")


def test_plot_rejects_options_of_other_analyses(interrdf):
    with pytest.raises(TypeError, match="sites"):
        interrdf.plot(sites=[(0, 0, 0)])
    matplotlib.pyplot.close("all")


def test_errors(interrdf, adk_water, tmp_path):
    with pytest.raises(ValueError, match="suffix"):
        save(interrdf, tmp_path / "rdf.txt")
    with pytest.raises(ValueError, match="format"):
        save(interrdf, tmp_path / "rdf.npz", format="xls")
    with pytest.raises(ValueError, match="must not change"):
        save(interrdf, tmp_path / "rdf.npz", metadata={"nbins": 3})
    ow = adk_water.select_atoms("name OW")[:10]
    with pytest.raises(RuntimeError, match="run"):
        InterRDF(ow, ow).save(tmp_path / "rdf.npz")
    bogus = tmp_path / "bogus.csv"
    bogus.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not written by mdakit_fastrdf"):
        load(bogus)


def test_hdf5_without_h5py_says_what_to_install(interrdf, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_h5py(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("no h5py")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_h5py)
    with pytest.raises(ImportError, match=r"pip install h5py"):
        interrdf.save(tmp_path / "rdf.h5")
