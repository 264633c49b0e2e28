"""Tests of the ``mdakit-fastrdf`` command-line interface on the demo data."""

import json
import subprocess
import sys

import numpy as np
import pytest

import mdakit_fastrdf
from mdakit_fastrdf.outputs.cli import first_peak, main

pytest.importorskip("MDAnalysisTests")

FAST = ["--stop", "2", "--no-progress"]


def test_csv_default_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(FAST) == 0
    out = capsys.readouterr().out
    assert "demo data" in out
    assert "First peak" in out
    assert "pair distances per second" in out

    lines = (tmp_path / "rdf.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# mdakit-fastrdf ")
    header = json.loads(lines[0].split(" ", 2)[2])
    parameters = header["parameters"]
    assert header["analysis"] == "InterRDF"
    assert parameters["select1"] == parameters["select2"] == "name OW"
    assert parameters["exclusion_block"] == [1, 1]
    assert parameters["n_frames"] == 2
    assert parameters["frames"] == [0, 1]
    assert parameters["version"] == mdakit_fastrdf.__version__
    assert lines[1].startswith("# columns: r_angstrom: bin centre (Å)")
    assert lines[2] == "r_angstrom,r_lo_angstrom,r_hi_angstrom,rdf,count"

    table = np.genfromtxt(tmp_path / "rdf.csv", delimiter=",", names=True, skip_header=2)
    assert table.shape == (75,)
    np.testing.assert_allclose(table["r_angstrom"], np.arange(75) * 0.2 + 0.1)
    assert table["count"][0] == 0  # self pairs are excluded in the demo
    r_peak, g_peak = first_peak(table["r_angstrom"], table["rdf"])
    assert 2.5 < r_peak < 3.1  # water O-O first shell
    assert g_peak > 2
    data = mdakit_fastrdf.load(tmp_path / "rdf.csv")
    np.testing.assert_array_equal(data.results.rdf, table["rdf"])


def test_npz_output(tmp_path):
    out = tmp_path / "rdf.npz"
    args = ["--nbins", "30", "--range", "2", "8", "--norm", "density", "-o", str(out)]
    assert main(FAST + args) == 0
    data = mdakit_fastrdf.load(out)
    np.testing.assert_allclose(data.results.edges, np.linspace(2.0, 8.0, 31))
    assert data.results.bins.shape == data.results.count.shape == data.results.rdf.shape == (30,)
    assert data.parameters["norm"] == "density"
    assert data.parameters["range"] == [2.0, 8.0]
    with np.load(out, allow_pickle=False) as z:  # plain numpy reads it too
        assert {"results.rdf", "results.count_uint64", "meta"} <= set(z.files)


def test_hdf5_output(tmp_path):
    pytest.importorskip("h5py")
    out = tmp_path / "rdf.h5"
    assert main(FAST + ["-o", str(out)]) == 0
    data = mdakit_fastrdf.load(out)
    assert data.analysis == "InterRDF"
    assert data.parameters["select1"] == "name OW"
    assert data.results.rdf.shape == (75,)


def test_blocks_and_backend(tmp_path, capsys):
    out = tmp_path / "rdf.npz"
    args = ["--stop", "4", "--no-progress", "--blocks", "2",
            "--backend", "multiprocessing", "--n-workers", "2", "-o", str(out)]
    assert main(args) == 0
    assert "standard error over 2 blocks" in capsys.readouterr().out
    data = mdakit_fastrdf.load(out)
    assert data.parameters["backend"] == "multiprocessing"
    assert data.parameters["n_workers"] == 2
    assert data.parameters["blocks"] == 2
    res = data.results
    assert res.block_count_uint64.shape == (2, 75)
    np.testing.assert_array_equal(res.block_count_uint64.sum(axis=0), res.count_uint64)
    np.testing.assert_allclose(res.rdf_sem, res.block_rdf.std(axis=0, ddof=1) / np.sqrt(2))


def test_unknown_backend_is_passed_to_run(tmp_path, capsys):
    # names other than MDAnalysis's go to run(backend=...) unchanged (e.g. the package's own
    # backends); an unknown one is reported as a one-line error
    args = FAST + ["--backend", "no-such-backend", "--n-workers", "2",
                   "-o", str(tmp_path / "rdf.csv")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "no-such-backend" in err
    assert "Traceback" not in err


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "rdf.png"
    args = ["-o", str(tmp_path / "rdf.csv"), "--plot", str(png), "--coordination"]
    assert main(FAST + args) == 0
    assert png.read_bytes().startswith(b"\x89PNG")


def test_info(capsys):
    assert main(["--info"]) == 0
    out = capsys.readouterr().out
    assert "version" in out
    assert "threads" in out


@pytest.mark.parametrize(
    ("selection", "message"),
    [("name NOSUCHATOM", "matches no atoms"), ("name OW and", "invalid selection")],
)
def test_bad_selection(selection, message, tmp_path, capsys):
    args = FAST + ["-s1", selection, "-o", str(tmp_path / "rdf.csv")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "rdf.csv").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["no_such_topology.tpr"],
        ["-o", "rdf.txt"],
        ["--range", "5", "1"],
        ["--norm", "bogus"],
        ["--exclusion-block", "1", "1", "--exclude-same", "residue"],
        ["--n-workers", "2"],
        ["--n-workers", "0", "--backend", "multiprocessing"],
        ["--blocks", "1"],
        ["--coordination"],
    ],
)
def test_bad_arguments(args, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(args)
    assert excinfo.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_unreadable_topology(tmp_path, capsys):
    bogus = tmp_path / "bogus.tpr"
    bogus.write_bytes(b"this is not a TPR file\n")
    assert main([str(bogus), "--no-progress", "-o", str(tmp_path / "rdf.csv")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mdakit-fastrdf: error:")
    assert "bogus.tpr" in err
    assert "Traceback" not in err


def test_python_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mdakit_fastrdf", "--stop", "1", "--no-progress", "-o", "x.csv"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x.csv").stat().st_size > 0
    assert "Results" in proc.stdout


def test_first_peak_falls_back_to_maximum():
    bins = np.linspace(0.05, 4.95, 50)
    rdf = np.linspace(0.0, 0.9, 50)  # no local maximum above 1
    assert first_peak(bins, rdf) == (pytest.approx(4.95), pytest.approx(0.9))
