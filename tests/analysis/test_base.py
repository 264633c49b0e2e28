"""The pair-histogram base: the rules every analysis shares (keywords, argument order,
device of the site mode) and the output layer's independence of analysis names."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from MDAnalysis.analysis import rdf as mda_rdf


from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF, load
from mdakit_fastrdf.analysis.declarations import analysis_class

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_keywords_raise_in_every_analysis(adk_water):
    ow = adk_water.select_atoms("name OW")[:20]
    with pytest.raises(TypeError, match="exclusion_block"):
        SpeciesRDF(adk_water.atoms[:30], by="type", exclusion_block=(1, 1))
    with pytest.raises(TypeError, match="exclude_slef"):
        SpeciesRDF(adk_water.atoms[:30], exclude_slef=True)
    with pytest.raises(TypeError, match="nbin"):
        InterRDF(ow, ow, nbin=10)
    with pytest.raises(TypeError, match="devcie"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        InterRDF_s(adk_water, [[ow[:2], ow[2:4]]], devcie="cpu")
    InterRDF(ow, ow, verbose=False)  # AnalysisBase's own keyword stays


def test_norm_is_checked_before_nbins_as_in_mdanalysis(adk_water):
    s1, s2 = adk_water.select_atoms("name OW")[:5], adk_water.select_atoms("name OW")[5:10]
    with pytest.raises(ValueError, match="invalid norm"):
        InterRDF(s1, s2, [[s1, s2]], norm="foo")
    with pytest.raises(ValueError, match="invalid norm"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        InterRDF_s(adk_water, [[s1, s2]], [[s1, s2]], norm="foo")


def test_site_mode_device(adk_water):
    """InterRDF_s takes device= on the engine's path: the CPU runs it; a GPU is a clear
    error (there is no GPU site kernel), the same as MDAnalysis's counts otherwise."""
    s1, s2 = adk_water.select_atoms("name OW")[:4], adk_water.select_atoms("name HW1")[:3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="no GPU kernel"):
            InterRDF_s(adk_water, [[s1, s2]], device="cuda")
        ours = InterRDF_s(adk_water, [[s1, s2]], device="cpu", precision="double").run(stop=3)
        ref = mda_rdf.InterRDF_s(adk_water, [[s1, s2]]).run(stop=3)
    assert ours.parameters()["device_used"] == "cpu"
    np.testing.assert_array_equal(ours.results.count[0], ref.results.count[0])
    np.testing.assert_array_equal(ours.results.rdf[0], ref.results.rdf[0])


def test_loading_an_unknown_analysis_says_so():
    with pytest.raises(ValueError, match="unknown analysis 'NoSuchRDF'"):
        analysis_class("NoSuchRDF")


def test_saved_parameters_come_from_each_analysis(adk_water, tmp_path):
    ow = adk_water.select_atoms("name OW")[:50]
    r = InterRDF(ow, ow, exclusion_block=(1, 1), nbins=10).run(stop=2)
    p = load(r.save(tmp_path / "a.npz")).parameters
    assert p["exclusion_block"] == [1, 1] and p["n_atoms1"] == 50 and p["analysis"] == "InterRDF"
    s = SpeciesRDF(adk_water.select_atoms("resname SOL")[:30], by="name", nbins=10).run(stop=2)
    p = load(s.save(tmp_path / "s.npz")).parameters
    assert p["species"] == s.species and p["exclude_self"] is False


def test_outputs_never_branch_on_an_analysis_name():
    """outputs/ and cli/ read declarations; no comparison with a class name."""
    names = ("InterRDF", "InterRDF_s", "SpeciesRDF")
    pattern = re.compile(r"""(==|!=|\bin\b)\s*\(?\s*["'](%s)["']""" % "|".join(names))
    package = ROOT / "mdakit_fastrdf"
    for path in [*(package / "outputs").glob("*.py"), *(package / "cli").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not pattern.search(text), f"{path.name} branches on an analysis name"
        assert "isinstance(obj, InterRDF" not in text


@pytest.mark.slow  # a new interpreter
def test_every_analysis_is_known_to_load_in_a_fresh_process(tmp_path):
    """load() of any analysis' file works in a new interpreter: importing the package
    registers every analysis class. The child runs outside the checkout, so that it imports
    the installed package (a source tree without the compiled module would shadow it)."""
    import subprocess
    import sys

    code = ("import mdakit_fastrdf; from mdakit_fastrdf.analysis.declarations import "
            "analysis_class as c; print([c(n).__name__ for n in "
            "('InterRDF', 'InterRDF_s', 'SpeciesRDF', 'KirkwoodBuff')])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "KirkwoodBuff" in res.stdout


@pytest.mark.parametrize("backend", ["multiprocessing", "dask", "node"])
def test_a_second_run_on_any_backend_gives_the_same_counts(backend, adk_water):
    """run() twice on one object: the second (parallel) run starts from empty results. The
    first run's results used to travel to the workers and come back as keys without an
    aggregator (MDAnalysis's own InterRDF fails the same way)."""
    from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF

    u = adk_water
    ow = u.select_atoms("name OW")[:200]
    sol = u.select_atoms("resname SOL")[:60]
    for a in (InterRDF(ow, ow, nbins=20, range=(0.0, 6.0)),
              SpeciesRDF(sol, by="name", nbins=20, range=(0.0, 6.0)),
              InterRDF_s(u, [[ow[:5], ow[5:10]]], nbins=20, range=(0.0, 6.0))):
        first = a.run(stop=4).results
        again = a.run(stop=4, backend=backend, n_workers=2).results
        assert set(again) == set(first)
        for key in ("count", "rdf"):
            np.testing.assert_array_equal(np.asarray(again[key]), np.asarray(first[key]))
