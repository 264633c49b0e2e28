"""MDAnalysis's own tests of InterRDF and InterRDF_s, run against this package.

The installed MDAnalysisTests' ``analysis/test_rdf.py`` and ``analysis/test_rdf_s.py`` are
copied with one change, the import line of the classes (``from mdakit_fastrdf import
InterRDF, InterRDF_s``; other names such as ``nested_array_sum`` still come from MDAnalysis),
next to the ``client_InterRDF`` / ``client_InterRDF_s`` fixtures of MDAnalysisTests'
``analysis/conftest.py`` (every parallel backend the class supports and is installed,
``n_workers=2``, and serial), and run by pytest in a subprocess. A newer MDAnalysis brings
its newer tests. They run on default arguments: passing them is the drop-in promise.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

MDA_TESTS = pytest.importorskip("MDAnalysisTests")
SOURCE = Path(MDA_TESTS.__file__).parent / "analysis"
IMPORT = re.compile(r"^from MDAnalysis\.analysis\.rdf import (?P<names>.+)$", re.MULTILINE)

CONFTEST = '''\
import pytest
from MDAnalysis.lib.util import is_installed

from mdakit_fastrdf import InterRDF, InterRDF_s


def params_for_cls(cls, exclude=None):
    """As MDAnalysisTests.analysis.conftest.params_for_cls."""
    exclude = [] if exclude is None else exclude
    installed = [b for b in cls.get_supported_backends() if is_installed(b) and b not in exclude]
    params = [pytest.param({"backend": b, "n_workers": n}) for b in installed for n in (2,)
              if b != "serial"]
    params.extend([{"backend": "serial"}])
    return params


@pytest.fixture(scope="module", params=params_for_cls(InterRDF))
def client_InterRDF(request):
    return request.param


@pytest.fixture(scope="module", params=params_for_cls(InterRDF_s))
def client_InterRDF_s(request):
    return request.param
'''


def swap_import(text):
    """The test module with its classes imported from mdakit_fastrdf (one line changed)."""
    match = IMPORT.search(text)
    assert match, "the module imports from MDAnalysis.analysis.rdf"
    names = [n.strip() for n in match["names"].split(",")]
    ours = [n for n in names if n in ("InterRDF", "InterRDF_s")]
    rest = [n for n in names if n not in ours]
    line = f"from mdakit_fastrdf import {', '.join(ours)}"
    if rest:
        line += f"; from MDAnalysis.analysis.rdf import {', '.join(rest)}"
    return text[:match.start()] + line + text[match.end():]


def test_swap_changes_one_line():
    text = (SOURCE / "test_rdf_s.py").read_text(encoding="utf-8")
    swapped = swap_import(text)
    diff = [(a, b) for a, b in zip(text.splitlines(), swapped.splitlines()) if a != b]
    assert len(diff) == 1 and "from mdakit_fastrdf import" in diff[0][1]


@pytest.mark.slow  # MDAnalysis's rdf tests on every backend in a subprocess: about 65 s
@pytest.mark.timeout(1200)
def test_mdanalysis_rdf_tests_pass_on_default_arguments(tmp_path):
    from MDAnalysisTests import datafiles

    missing = [n for n in ("two_water_gro", "GRO_MEMPROT", "XTC_MEMPROT")
               if not os.path.exists(getattr(datafiles, n))]
    if missing:  # (a machine given only some of MDAnalysisTests' data, as the GPU machines)
        pytest.skip(f"MDAnalysisTests data file(s) {', '.join(missing)} not available")
    for name in ("test_rdf.py", "test_rdf_s.py"):
        text = (SOURCE / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(swap_import(text), encoding="utf-8")
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    env = dict(os.environ)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1150)
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-2000:]
    assert res.returncode == 0, f"{summary}\n{res.stdout[-6000:]}\n{res.stderr[-2000:]}"
    assert "failed" not in summary and "error" not in summary
    passed = int(re.search(r"(\d+) passed", summary)[1])
    assert passed >= 100, summary  # MDAnalysis 2.8-2.11 has about 130 of them
