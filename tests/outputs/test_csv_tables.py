"""CSV files of analyses whose results run over two axes (issue 38, item 8): one table per
axis, each in its own file with only its own columns, read back by ``load`` from either file.

StructureFactor writes ``sq.csv`` (rows over q) and ``sq_gr.csv`` (the partial g(r) it
transformed, rows over r); DebyeScattering ``debye.csv`` (over q) and
``debye_histogram.csv`` (the pair-distance histograms, over r).
"""

import csv

import numpy as np
import pytest
from conftest import make_universe

from mdakit_fastrdf import DebyeScattering, StructureFactor, load


def _table(path):
    lines = [line for line in path.read_text(encoding="utf-8").splitlines()
             if not line.startswith("#")]
    rows = list(csv.reader(lines))
    return rows[0], rows[1:]


@pytest.fixture(scope="module")
def sf():
    rng = np.random.default_rng(3)
    coords = rng.uniform(0, 20.0, size=(3, 300, 3))
    u = make_universe(coords, [20.0, 20.0, 20.0, 90, 90, 90], names=["A"] * 200 + ["B"] * 100)
    u.add_TopologyAttr("elements", ["O"] * 200 + ["H"] * 100)
    return StructureFactor(u.atoms, by="name", nbins=200, range=(0.0, 9.0), qbins=25,
                           q_range=(0.0, 6.0), q_crossover=None).run(blocks=3)


@pytest.fixture(scope="module")
def debye():
    rng = np.random.default_rng(4)
    u = make_universe(rng.normal(size=(2, 60, 3)) * 5 + 30.0, names=["C"] * 40 + ["O"] * 20)
    u.add_TopologyAttr("elements", ["C"] * 40 + ["O"] * 20)
    return DebyeScattering(u.atoms, q=[0.1, 0.5, 1.0, 2.0], device="cpu").run()


def test_sq_csv_one_table_per_axis(sf, tmp_path):
    path = sf.save(tmp_path / "sq.csv")
    gr = tmp_path / "sq_gr.csv"
    assert path == tmp_path / "sq.csv" and gr.exists()
    names, rows = _table(path)
    # over q: one row per q, every cell filled, no r column
    assert len(rows) == len(sf.results.q)
    assert names[0] == "q" and "r_angstrom" not in names and "rdf" not in names
    assert {"s", "s_sem", "f", "s_transform", "s_direct"} <= set(names)
    assert "partials_A_B" in names and "partials_transform_B_B" in names
    assert all(cell != "" for row in rows for cell in row)
    # over r: the partial g(r), no q column and no S(q) column
    names_r, rows_r = _table(gr)
    assert "r_angstrom" in names_r and "rdf" in names_r
    assert not {"q", "s", "f", "partials"} & set(names_r)
    assert len(rows_r) == (len(sf.results.pairs) + 1) * len(sf.results.bins)


@pytest.mark.parametrize("which", ["sq.csv", "sq_gr.csv"])
def test_sq_csv_round_trip(sf, tmp_path, which):
    sf.save(tmp_path / "sq.csv")
    data = load(tmp_path / which)
    assert data.analysis == "StructureFactor"
    for name in ("q", "q_edges", "s", "s_sem", "f", "partials", "partials_transform",
                 "block_s", "rdf", "count_uint64", "total_rdf", "bins", "edges", "cdf"):
        np.testing.assert_array_equal(np.asarray(data.results[name]), sf.results[name],
                                      err_msg=name)
    # and saved again (CSV to CSV) it reads back the same
    again = load(data.save(tmp_path / "again.csv"))
    np.testing.assert_array_equal(again.results.partials, sf.results.partials)
    assert (tmp_path / "again_gr.csv").exists()


def test_companion_without_its_main_file(sf, tmp_path):
    sf.save(tmp_path / "sq.csv")
    (tmp_path / "sq.csv").unlink()
    with pytest.raises(FileNotFoundError, match="sq.csv"):
        load(tmp_path / "sq_gr.csv")


def test_debye_csv_one_table_per_axis(debye, tmp_path):
    path = debye.save(tmp_path / "debye.csv")
    names, rows = _table(path)
    assert names[0] == "q" and "r_angstrom" not in names
    assert len(rows) == 4 and all(cell != "" for row in rows for cell in row)
    names_r, _ = _table(tmp_path / "debye_histogram.csv")
    assert "r_angstrom" in names_r and "q" not in names_r
    data = load(path)
    for name in ("q", "intensity", "partials", "pair_sums", "count_uint64", "bins", "edges"):
        np.testing.assert_array_equal(np.asarray(data.results[name]), debye.results[name],
                                      err_msg=name)


def test_one_axis_analyses_write_one_file(tmp_path):
    from mdakit_fastrdf import InterRDF

    rng = np.random.default_rng(1)
    u = make_universe(rng.uniform(0, 15.0, size=(2, 100, 3)), [15.0, 15.0, 15.0, 90, 90, 90])
    InterRDF(u.atoms, u.atoms, nbins=20, range=(0.0, 7.0)).run().save(tmp_path / "rdf.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rdf.csv"]
