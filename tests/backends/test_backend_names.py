"""Backend names of ``run(backend=...)``: an unknown name is a ValueError that lists the
valid names and the closest one (issue 38, item 6)."""

import pytest

from mdakit_fastrdf import InterRDF


@pytest.fixture(scope="module")
def ow(adk_water):
    return adk_water.select_atoms("name OW")


@pytest.mark.parametrize("name, closest", [("multiproc", "multiprocessing"),
                                           ("nodes", "node"), ("serail", "serial")])
def test_unknown_backend_name_lists_names_and_closest(ow, name, closest):
    with pytest.raises(ValueError) as info:
        InterRDF(ow, ow).run(backend=name, n_workers=2, stop=1)
    text = str(info.value)
    assert f"backend={name!r}" in text
    assert f"did you mean {closest!r}?" in text
    for valid in ("'serial'", "'multiprocessing'", "'dask'", "'node'"):
        assert valid in text
    assert "unsupported_backend" not in text


def test_unknown_backend_name_without_close_match(ow):
    with pytest.raises(ValueError, match=r"backend='xyzzy' is not a backend") as info:
        InterRDF(ow, ow).run(backend="xyzzy", stop=1)
    assert "did you mean" not in str(info.value)


def test_backend_names_ignore_case_and_spaces(ow):
    ref = InterRDF(ow, ow, nbins=20, range=(0.0, 6.0)).run(stop=1)
    got = InterRDF(ow, ow, nbins=20, range=(0.0, 6.0)).run(stop=1, backend=" Serial")
    assert (got.results.count == ref.results.count).all()


@pytest.mark.parametrize("backend", [3, InterRDF])
def test_backend_of_the_wrong_type(ow, backend):
    with pytest.raises(TypeError, match="backend must be one of the names"):
        InterRDF(ow, ow).run(backend=backend, stop=1)


def test_backend_class_instead_of_object(ow):
    from MDAnalysis.analysis.backends import BackendMultiprocessing

    with pytest.raises(TypeError, match=r"BackendMultiprocessing\(n_workers=2\)"):
        InterRDF(ow, ow).run(backend=BackendMultiprocessing, stop=1)


@pytest.mark.parametrize("command", [[], ["debye"]])
def test_cli_unknown_backend(tmp_path, capsys, command):
    """--backend is checked as the command line is read (exit status 2, argparse's)."""
    from mdakit_fastrdf.cli import main

    out = tmp_path / "rdf.csv"
    with pytest.raises(SystemExit) as info:
        main([*command, "--stop", "1", "--no-progress", "--backend", "multiproc",
              "--n-workers", "2", "-o", str(out)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --backend: 'multiproc' is not a backend (did you mean multiprocessing?)" in err
    assert "serial, multiprocessing, dask, node" in err
    assert not out.exists()
