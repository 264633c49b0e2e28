"""Where InterRDF_s's time and memory go (issue 38, item 10): the benchmark and the docs.

* ``benchmarks/bench_sites.py`` runs (small groups) and prints its tables with the ratio
  against MDAnalysis's InterRDF_s of the same run;
* the memory that docs/performance.rst states for the issue's case is the size of
  MDAnalysis's result arrays, computed here from the shapes (8 bytes x nbins x sum n1 n2,
  for ``results.count`` and ``results.rdf``);
* the compact form the docs offer beside the drop-in: ``InterRDF`` of a pair of groups is
  the mean over the site pairs of MDAnalysis's own ``InterRDF_s`` (the reference).
"""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from mdakit_fastrdf import InterRDF, SpeciesRDF

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # runs a benchmark script in a new interpreter
def test_bench_sites_prints_tables_with_ratios():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_sites.py"), "--small",
         "--repeat", "1", "--cold", "0", "--stop", "2"],
        capture_output=True, text=True, check=True, timeout=300).stdout
    for title in ("## 1. warm", "## 3. memory", "## 4. compact"):
        assert title in out
    warm = out[out.index("## 1. warm"):out.index("## 3. memory")]
    rows = {line.split("|")[1].strip(): line for line in warm.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert re.search(r"\| 1\.00x \|$", rows["MDAnalysis InterRDF_s"])
    assert re.search(r"\| \d+\.\d\dx \|$", rows["fastrdf InterRDF_s"])
    # the compact forms agree with the mean over the site pairs
    diffs = [float(m) for m in re.findall(r"rel\. diff ([0-9.e+-]+)", out)]
    assert len(diffs) == 2 and max(diffs) < 1e-12


def _section(text, title):
    start = text.index(title)
    nxt = re.search(r"\n[^\n]+\n-{5,}\n", text[start + len(title) + 1:])
    return text[start: start + len(title) + 1 + (nxt.start() if nxt else len(text))]


def test_performance_docs_explain_interrdf_s():
    text = (ROOT / "docs" / "performance.rst").read_text(encoding="utf-8")
    sec = _section(text, "InterRDF_s: where the time goes")
    assert "bench_sites.py" in sec
    # the result arrays of the case: count and rdf, float64, 75 bins
    n_site_pairs = 100 * 3000 + 4 * 11084
    mb = 2 * 8 * 75 * n_site_pairs / 1e6
    assert f"{mb:.1f} MB" in sec  # 413.2 MB
    assert f"{n_site_pairs:,}" in sec  # 344,336 site pairs
    for form in ("InterRDF", "SpeciesRDF"):
        assert form in sec


def test_compact_form_is_the_mean_over_site_pairs(adk_water):
    """The by-group RDF (the compact form) equals the mean over the site pairs of
    MDAnalysis's InterRDF_s: the equivalence the docs rely on."""
    from MDAnalysis.analysis.rdf import InterRDF_s as MDAInterRDF_s

    ow = adk_water.select_atoms("name OW")
    na = adk_water.select_atoms("resname NA+")
    ags = [[ow[:20], ow[:300]], [na, ow[:2000]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ref = MDAInterRDF_s(adk_water, ags).run(stop=2).results.rdf
    for (a, b), site in zip(ags, ref):
        got = InterRDF(a, b, precision="double").run(stop=2).results.rdf
        np.testing.assert_allclose(got, site.mean(axis=(0, 1)), rtol=1e-12, atol=0)
    species = SpeciesRDF(na + ow[:2000], by=[na, ow[:2000]], precision="double").run(stop=2)
    k = [tuple(map(int, p)) for p in species.results.pairs].index((0, 1))
    np.testing.assert_allclose(species.results.rdf[k], ref[1].mean(axis=(0, 1)), rtol=1e-12,
                               atol=0)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
