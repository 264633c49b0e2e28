"""Tests of the ``mdakit-fastrdf`` command-line interface on the demo data."""

import json
import subprocess
import sys

import numpy as np
import pytest

import mdakit_fastrdf
from mdakit_fastrdf.cli import main
from mdakit_fastrdf.cli.common import cli_message

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
    assert lines[1].startswith("# columns") and "r_angstrom: bin centre (Å)" in lines[1]
    columns = {"r_angstrom", "r_lo_angstrom", "r_hi_angstrom", "rdf", "count", "cdf",
               "coordination"}
    assert set(lines[2].split(",")) == columns

    table = np.genfromtxt(tmp_path / "rdf.csv", delimiter=",", names=True, skip_header=2)
    assert table.shape == (75,)
    np.testing.assert_allclose(table["r_angstrom"], np.arange(75) * 0.2 + 0.1)
    assert table["count"][0] == 0  # self pairs are excluded in the demo
    # the summary's first peak and minimum are first_shell's (OW with itself: count halved)
    shell = mdakit_fastrdf.first_shell(table["r_angstrom"], table["rdf"],
                                       table["coordination"], count=table["count"] / 2)
    assert 2.5 < shell.r_peak < 3.1 and shell.g_peak > 2  # water O-O first shell
    assert 3.0 < shell.r_min < 3.8
    peak = next(line for line in out.splitlines() if line.startswith("First peak "))
    assert float(peak.split("at r = ")[1].split()[0]) == pytest.approx(shell.r_peak, abs=1e-3)
    assert float(peak.split("g(r) = ")[1].split()[0]) == pytest.approx(shell.g_peak, rel=1e-3)
    minimum = next(line for line in out.splitlines() if line.startswith("First shell:"))
    assert float(minimum.split("minimum at r = ")[1].split()[0]) == pytest.approx(
        shell.r_min, abs=1e-3)
    assert float(minimum.split("coordination number ")[1].split()[0]) == pytest.approx(
        shell.coordination, rel=1e-3)
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


def test_unknown_backend_is_an_argument_error(tmp_path, capsys):
    # --backend takes the names run(backend=...) knows; an unknown one is an argparse error
    # naming them (tests/backends/test_backend_names.py)
    args = FAST + ["--backend", "no-such-backend", "--n-workers", "2",
                   "-o", str(tmp_path / "rdf.csv")]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "no-such-backend" in err and "serial, multiprocessing, dask, node" in err
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


@pytest.mark.slow  # python -m mdakit_fastrdf in a new interpreter
def test_python_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mdakit_fastrdf", "--stop", "1", "--no-progress", "-o", "x.csv"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x.csv").stat().st_size > 0
    assert "Results" in proc.stdout


@pytest.mark.parametrize(("extra", "quantity"), [
    (["--norm", "density"], "ρ(r)"),  # first_shell needs g(r)
    (["--range", "4", "8", "--nbins", "20"], "g(r)"),  # no first shell in the range
])
def test_summary_without_a_first_shell_gives_the_maximum(tmp_path, capsys, extra, quantity):
    path = tmp_path / "rdf.npz"
    assert main(FAST + extra + ["-o", str(path)]) == 0
    out = capsys.readouterr().out
    assert "First peak " not in out
    res = mdakit_fastrdf.load(path).results
    k = int(np.argmax(res.rdf))
    assert f"Maximum    : {quantity} = {res.rdf[k]:.4g} at r = {res.bins[k]:.3f} Å" in out
    if quantity == "g(r)":
        assert "First shell: not found (" in out


# --- issue 23: messages, early checks, self pairs -------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nbins", "1e9"], "--nbins: expected a positive integer, got '1e9'"),
        (["--nbins", "0"], "--nbins: expected a positive integer, got '0'"),
        (["--exclusion-block", "1", "x"],
         "--exclusion-block: expected a positive integer, got 'x'"),
        (["--step", "-2"], "--step: expected a positive integer, got '-2'"),
        (["--n-threads", "two"], "--n-threads: expected a positive integer, got 'two'"),
        (["--backend", "multiprocessing", "--n-workers", "1.5"],
         "--n-workers: expected a positive integer, got '1.5'"),
        (["--blocks", "many"], "--blocks: expected an integer of at least 2"),
        (["--backend", " "], "--backend: ' ' is not a backend; the backends are serial,"),
        (["--device", "gpu"], "--device: expected auto, cpu, cuda or cuda:N, got 'gpu'"),
    ],
)
def test_option_type_messages(args, message, capsys):
    # argparse shows the name of a type function that raises ValueError ("invalid
    # _positive_int value"); every custom type gives its own message instead
    with pytest.raises(SystemExit) as excinfo:
        main(args)
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "_positive_int" not in err and "invalid" not in err


def _write_boxless_xyz(path, n_atoms=40, n_frames=2):
    """An XYZ trajectory: MDAnalysis reads it without a box (dimensions None)."""
    rng = np.random.default_rng(7)
    with open(path, "w", encoding="utf-8") as fh:
        for frame in range(n_frames):
            fh.write(f"{n_atoms}\nframe {frame}\n")
            xyz = rng.uniform(0.0, 20.0, (n_atoms, 3))
            fh.writelines(f"O {x:.3f} {y:.3f} {z:.3f}\n" for x, y, z in xyz)
    return path


def test_no_box_error_names_cli_options(tmp_path, capsys):
    xyz = _write_boxless_xyz(tmp_path / "nobox.xyz")
    out = tmp_path / "rdf.csv"
    assert main([str(xyz), "-s1", "name O", "--no-progress", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "has no box" in err
    assert "--norm density" in err and "--norm none" in err
    assert "norm='" not in err  # no Python keyword syntax
    assert "Traceback" not in err
    assert not out.exists()
    # the same system with a norm that needs no box runs
    assert main([str(xyz), "-s1", "name O", "--no-progress", "--norm", "density",
                 "-o", str(out)]) == 0
    assert mdakit_fastrdf.load(out).parameters["norm"] == "density"


def test_runtime_errors_name_cli_options(monkeypatch, capsys):
    # an error raised during the run (e.g. a frame without a box after framed ones) names
    # the CLI's options, not the keyword arguments of the analysis
    from mdakit_fastrdf.cli import app as cli

    def fail(args):
        raise ValueError(
            "norm='rdf' needs the box volume, but this trajectory has no box (frame 3: "
            "dimensions=None). Use norm='density' or norm='none'; exclusion_block=(1, 1)")

    monkeypatch.setattr(cli, "run", fail)
    assert main(FAST) == 1
    err = capsys.readouterr().err
    assert "Use --norm density or --norm none; --exclusion-block 1 1" in err
    assert "--norm rdf needs the box volume" in err
    assert "dimensions=None" in err  # other keywords stay as they are


def test_cli_message():
    assert cli_message("use device='cpu' or device=\"auto\"") == "use --device cpu or --device auto"
    assert cli_message("range=(0.0, 15.0), nbins=75") == "--range 0.0 15.0, --nbins 75"
    assert cli_message("n_threads=None") == "no --n-threads"
    assert cli_message("method='cells', my_norm='x'") == "method='cells', my_norm='x'"


def _no_run(monkeypatch):
    """Make any computation fail the test: the checks must come before it."""
    from mdakit_fastrdf.cli import app as cli

    def run(args):
        raise AssertionError("the computation started")

    monkeypatch.setattr(cli, "run", run)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "{tmp}/no_such_dir/out.csv"], "--output: cannot write"),
        (["-o", "/nonexistent_dir/out.csv"], "'/nonexistent_dir' does not exist"),
        (["-o", "{tmp}/a_file.csv/out.csv"], "is not a directory"),
        (["-o", "{tmp}/subdir.csv"], "is a directory"),
        (["-o", "{tmp}/out.txt"], "--output must end in .csv, .npz, .h5 or .hdf5"),
        (["--plot", "{tmp}/no_such_dir/rdf.png"], "--plot: cannot write"),
        (["--plot", "{tmp}/rdf.xyz"],
         "--plot: '{tmp}/rdf.xyz' must end in a format matplotlib writes"),
        (["--plot", "{tmp}/rdf"], "must end in a format matplotlib writes ("),
        (["-o", "{tmp}/rdf.csv", "--plot", "{tmp}/rdf.csv"], "must end in a format"),
    ],
)
def test_outputs_checked_before_computing(args, message, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "a_file.csv").write_text("x", encoding="utf-8")
    (tmp_path / "subdir.csv").mkdir()
    _no_run(monkeypatch)
    args = [a.format(tmp=tmp_path) for a in args]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "rdf.csv")]
    with pytest.raises(SystemExit) as excinfo:
        main(FAST + args)
    assert excinfo.value.code == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err


def _fake_cuda(monkeypatch, reason, n_devices=0):
    """A CUDA build whose GPU check gives `reason` (None: `n_devices` usable GPUs), patched
    on engine.cuda, where the command line looks the probe up."""
    from mdakit_fastrdf.engine import cuda as engine

    real = engine.validate_device

    def validate_device(device):
        if device.startswith("cuda"):
            return "cuda:" + (device.partition(":")[2] or "0")
        return real(device)

    monkeypatch.setattr(engine, "validate_device", validate_device)
    monkeypatch.setattr(engine, "cuda_unavailable_reason", lambda: reason)
    monkeypatch.setattr(engine, "cuda_devices", lambda: [{"index": i} for i in range(n_devices)])


def test_cuda_without_gpu_fails_before_the_run(tmp_path, monkeypatch, capsys):
    # device='cuda' on a machine without a usable GPU: one message, before the demo data is
    # loaded or a progress bar is shown
    _fake_cuda(monkeypatch, "no usable CUDA device (no CUDA-capable device is detected)")
    _no_run(monkeypatch)
    with pytest.raises(SystemExit) as excinfo:
        main(["--device", "cuda", "-o", str(tmp_path / "rdf.csv")])
    assert excinfo.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "--device cuda:0: no usable CUDA device (no CUDA-capable device is detected); " \
           "use --device cpu or --device auto" in err
    assert "it/s" not in err and "%|" not in err


def test_cuda_index_beyond_the_gpus(tmp_path, monkeypatch, capsys):
    _fake_cuda(monkeypatch, None, n_devices=1)
    _no_run(monkeypatch)
    with pytest.raises(SystemExit):
        main(["--device", "cuda:3", "-o", str(tmp_path / "rdf.csv")])
    assert "--device cuda:3: no GPU 3 here (1 CUDA device found)" in capsys.readouterr().err


def test_cuda_check_of_a_parallel_run_leaves_this_process_alone(tmp_path, monkeypatch, capsys):
    # with workers forked from this process, CUDA must not be initialised here: the check runs
    # in another interpreter, which imports the real engine (here: a build without CUDA)
    from mdakit_fastrdf import build_info
    from mdakit_fastrdf.engine import cuda as engine

    if build_info()["cuda"]:
        pytest.skip("a CUDA build: whether this machine has a GPU decides the outcome")
    _fake_cuda(monkeypatch, None, n_devices=1)

    def initialise():
        raise AssertionError("CUDA initialised in the parent of the workers")

    monkeypatch.setattr(engine, "cuda_unavailable_reason", initialise)
    monkeypatch.setattr(engine, "cuda_devices", initialise)
    _no_run(monkeypatch)
    with pytest.raises(SystemExit) as excinfo:
        main(["--device", "cuda", "--backend", "multiprocessing", "--n-workers", "2",
              "-o", str(tmp_path / "rdf.csv")])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "--device cuda:0: this build of mdakit_fastrdf has no CUDA kernels" in err


def _own_system(*args, tmp_path):
    """Arguments running the demo files as the user's own system (no demo defaults)."""
    from MDAnalysisTests.datafiles import TPR, XTC

    return [TPR, XTC, "--stop", "1", "--no-progress", "-o", str(tmp_path / "rdf.npz"), *args]


def test_same_selection_excludes_self_pairs(tmp_path, capsys):
    assert main(_own_system("-s1", "name OW", tmp_path=tmp_path)) == 0
    out = capsys.readouterr().out
    assert "Exclusion  : self pairs" in out and "--keep-self-pairs" in out
    data = mdakit_fastrdf.load(tmp_path / "rdf.npz")
    assert data.parameters["exclusion_block"] == [1, 1]
    assert data.results.count[0] == 0  # no spike at r = 0


def test_same_atoms_by_two_selections_excludes_self_pairs(tmp_path):
    assert main(_own_system("-s1", "name OW", "-s2", "resname SOL and name OW",
                            tmp_path=tmp_path)) == 0
    assert mdakit_fastrdf.load(tmp_path / "rdf.npz").parameters["exclusion_block"] == [1, 1]


def test_keep_self_pairs(tmp_path, capsys):
    assert main(_own_system("-s1", "name OW", "--keep-self-pairs", tmp_path=tmp_path)) == 0
    assert "Exclusion  : none (--keep-self-pairs" in capsys.readouterr().out
    data = mdakit_fastrdf.load(tmp_path / "rdf.npz")
    assert data.parameters["exclusion_block"] is None
    assert data.results.count[0] == 11084  # each water oxygen with itself, one frame


def test_different_selections_exclude_nothing(tmp_path, capsys):
    assert main(_own_system("-s1", "name OW", "-s2", "name HW1", tmp_path=tmp_path)) == 0
    # nothing is excluded; the summary says that the O-H pairs of a molecule are counted
    assert ("Exclusion  : none (" in (out := capsys.readouterr().out)
            and "--exclude-same residue leaves them out" in out)
    assert mdakit_fastrdf.load(tmp_path / "rdf.npz").parameters["exclusion_block"] is None


def test_explicit_exclusion_wins(tmp_path, capsys):
    assert main(_own_system("-s1", "name OW", "--exclude-same", "residue",
                            tmp_path=tmp_path)) == 0
    assert "Exclusion  : pairs within the same residue" in capsys.readouterr().out
    data = mdakit_fastrdf.load(tmp_path / "rdf.npz")
    assert data.parameters["exclusion_block"] is None
    assert data.parameters["exclude_same"] == "residue"


@pytest.mark.parametrize("other", [["--exclusion-block", "1", "1"], ["--exclude-same", "residue"]])
def test_keep_self_pairs_conflicts(other, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["--keep-self-pairs", *other])
    assert excinfo.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_help_tells_the_self_pair_default(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--keep-self-pairs" in out
    assert "when -s1 and -s2 select the same atoms, 1 1" in out


def test_updating_selections(tmp_path, capsys):
    """--updating evaluates the selections in every frame: the counts and g(r) of InterRDF
    run on UpdatingAtomGroups directly, the frame-averaged sizes in the summary."""
    import warnings

    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import InterRDF

    sel = "name OW and around 5 protein"
    assert main([TPR, XTC, "-s1", sel, "-s2", "name OW", "--updating", "--stop", "3",
                 "--no-progress", "-o", str(tmp_path / "rdf.npz")]) == 0
    out = capsys.readouterr().out
    assert "atoms on average (--updating)" in out and "in the first frame" in out
    data = mdakit_fastrdf.load(tmp_path / "rdf.npz")
    u = mda.Universe(TPR, XTC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = InterRDF(u.select_atoms(sel, updating=True), u.select_atoms("name OW")).run(stop=3)
    np.testing.assert_array_equal(data.results.count, ref.results.count)
    np.testing.assert_allclose(data.results.rdf, ref.results.rdf, rtol=1e-14)


def test_lateral(tmp_path, capsys):
    """--lateral z: LateralRDF's numbers (in-plane densities in Å⁻²), read back by load()."""
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import GRO_MEMPROT, XTC_MEMPROT

    from mdakit_fastrdf import LateralRDF

    assert main([GRO_MEMPROT, XTC_MEMPROT, "-s1", "name P", "--lateral", "z", "--range", "0",
                 "25", "--nbins", "50", "--stop", "2", "--no-progress",
                 "-o", str(tmp_path / "lat.npz")]) == 0
    assert "Å⁻² ('name P'), N / <A>" in capsys.readouterr().out
    data = mdakit_fastrdf.load(tmp_path / "lat.npz")
    u = mda.Universe(GRO_MEMPROT, XTC_MEMPROT)
    p = u.select_atoms("name P")
    ref = LateralRDF(p, p, nbins=50, range=(0.0, 25.0), exclusion_block=(1, 1)).run(stop=2)
    np.testing.assert_array_equal(data.results.count, ref.results.count)
    np.testing.assert_allclose(data.results.rdf, ref.results.rdf, rtol=1e-14)
    assert main([GRO_MEMPROT, "-s1", "name P", "--lateral", "z", "--finite-size",
                 "--keep-self-pairs", "-o", str(tmp_path / "x.npz")]) == 1
    assert "--finite-size cannot be combined with --lateral" in capsys.readouterr().err


def test_slab(tmp_path, capsys):
    """--lateral z --slab 1.5 --slab-distance 3d: LateralRDF's slab numbers; a slab without
    --lateral is an error naming the fix."""
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import GRO_MEMPROT, XTC_MEMPROT

    from mdakit_fastrdf import LateralRDF

    assert main([GRO_MEMPROT, XTC_MEMPROT, "-s1", "name P", "--lateral", "z", "--slab", "1.5",
                 "--slab-distance", "3d", "--range", "0", "25", "--nbins", "50", "--stop",
                 "2", "--no-progress", "-o", str(tmp_path / "slab.npz")]) == 0
    capsys.readouterr()
    data = mdakit_fastrdf.load(tmp_path / "slab.npz")
    u = mda.Universe(GRO_MEMPROT, XTC_MEMPROT)
    p = u.select_atoms("name P")
    ref = LateralRDF(p, p, nbins=50, range=(0.0, 25.0), exclusion_block=(1, 1), slab=1.5,
                     distance="3d").run(stop=2)
    np.testing.assert_array_equal(data.results.count, ref.results.count)
    np.testing.assert_allclose(data.results.rdf, ref.results.rdf, rtol=1e-14)
    assert data.results.count.sum() > 0
    assert main([GRO_MEMPROT, "-s1", "name P", "--slab", "1.5", "-o",
                 str(tmp_path / "x.npz")]) == 1
    assert "--slab and --slab-distance need --lateral" in capsys.readouterr().err


def test_compound_centres(tmp_path, capsys):
    """--compound residues --no-unwrap: InterRDF's compound= numbers; the summary counts
    centres."""
    import warnings

    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import InterRDF

    assert main([TPR, XTC, "-s1", "resname SOL", "--compound", "residues", "--no-unwrap",
                 "--center", "mass", "--stop", "2", "--no-progress",
                 "-o", str(tmp_path / "c.npz")]) == 0
    assert "11084 x 11084 residues centres (mass)" in capsys.readouterr().out
    data = mdakit_fastrdf.load(tmp_path / "c.npz")
    u = mda.Universe(TPR, XTC)
    sol = u.select_atoms("resname SOL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = InterRDF(sol, sol, compound="residues", center="mass", unwrap=False,
                       exclusion_block=(1, 1)).run(stop=2)
    np.testing.assert_array_equal(data.results.count, ref.results.count)
