"""Tests of the ``mdakit-fastrdf`` command-line interface on the demo data."""

import json
import subprocess
import sys

import numpy as np
import pytest

from mdakit_fastrdf.cli import first_peak, main

pytest.importorskip("MDAnalysisTests")

FAST = ["--stop", "2", "--no-progress"]


def test_csv_default_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(FAST) == 0
    out = capsys.readouterr().out
    assert "demo data" in out
    assert "First peak" in out
    assert "pair distances per second" in out

    lines = (tmp_path / "rdf.csv").read_text().splitlines()
    assert lines[0].startswith("# mdakit-fastrdf ")
    parameters = json.loads(lines[0].split(" ", 2)[2])
    assert parameters["select1"] == parameters["select2"] == "name OW"
    assert parameters["exclusion_block"] == [1, 1]
    assert parameters["n_frames"] == 2
    assert lines[1] == "r_angstrom,rdf,count"

    table = np.loadtxt(tmp_path / "rdf.csv", delimiter=",", skiprows=2)
    assert table.shape == (75, 3)
    np.testing.assert_allclose(table[:, 0], np.arange(75) * 0.2 + 0.1)
    assert table[0, 2] == 0  # self pairs are excluded in the demo
    r_peak, g_peak = first_peak(table[:, 0], table[:, 1])
    assert 2.5 < r_peak < 3.1  # water O-O first shell
    assert g_peak > 2


def test_npz_output(tmp_path):
    out = tmp_path / "rdf.npz"
    args = ["--nbins", "30", "--range", "2", "8", "--norm", "density", "-o", str(out)]
    assert main(FAST + args) == 0
    with np.load(out) as data:
        assert set(data.files) == {"bins", "edges", "count", "rdf", "parameters"}
        np.testing.assert_allclose(data["edges"], np.linspace(2.0, 8.0, 31))
        assert data["bins"].shape == data["count"].shape == data["rdf"].shape == (30,)
        parameters = json.loads(str(data["parameters"]))
    assert parameters["norm"] == "density"
    assert parameters["range"] == [2.0, 8.0]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "rdf.png"
    assert main(FAST + ["-o", str(tmp_path / "rdf.csv"), "--plot", str(png)]) == 0
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
    assert "Table" in proc.stdout


def test_first_peak_falls_back_to_maximum():
    bins = np.linspace(0.05, 4.95, 50)
    rdf = np.linspace(0.0, 0.9, 50)  # no local maximum above 1
    assert first_peak(bins, rdf) == (pytest.approx(4.95), pytest.approx(0.9))
