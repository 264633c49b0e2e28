"""The worked example of "Adding an analysis" (docs/design.rst) runs as written, and the
analysis it defines is right: its n(r) against MDAnalysis's own InterRDF counts."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.rst"


def _section_code():
    text = DESIGN.read_text(encoding="utf-8")
    start = text.index("Adding an analysis\n------------------")
    end = text.index("\n----", text.index("\n", start + 40) + 1)
    section = text[start:end]
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section)
    assert len(blocks) == 2, "the section has the class and its use"
    return ["\n".join(line[3:] for line in b.splitlines()) for b in blocks]


def test_example_runs_and_counts_as_mdanalysis(tmp_path, monkeypatch, adk_water):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

    monkeypatch.chdir(tmp_path)
    cls_code, use_code = _section_code()
    use_code = use_code.replace(".run(blocks=5)", ".run(stop=5, blocks=5)")
    ns = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(cls_code, str(DESIGN), "exec"), ns)
        exec(compile(use_code, str(DESIGN), "exec"), ns)
    c, data = ns["c"], ns["data"]
    assert (tmp_path / "n.csv").exists()
    np.testing.assert_array_equal(data.results.n, c.results.n)
    assert c.results.n_sem.shape == c.results.n.shape

    # reference: MDAnalysis's InterRDF of the same groups and frames, accumulated by hand
    u = adk_water
    na, ow = u.select_atoms("resname NA+"), u.select_atoms("name OW")
    ref = MDAInterRDF(na, ow, nbins=60, range=(0.0, 6.0)).run(stop=5)
    expected = np.cumsum(ref.results.count) / (5 * len(na))
    np.testing.assert_allclose(c.results.n, expected, rtol=0, atol=1e-12)


def test_example_rejects_unknown_keywords(adk_water):
    cls_code, _ = _section_code()
    ns = {}
    exec(compile(cls_code, str(DESIGN), "exec"), ns)
    u = adk_water
    na = u.select_atoms("resname NA+")
    with pytest.raises(TypeError, match="exclude_slef"):
        ns["Coordination"](na, na, exclude_slef=True)
