"""The README's two newcomer commands are the ones continuous integration runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CI_SCRIPT = ROOT / ".ci" / "run"

COMMANDS = {
    "Install and compute a water RDF": (
        'python -m pip install ".[test]" && mdakit-fastrdf --plot rdf.png'
    ),
    "Run the tests": "python -m pytest tests",
}


def first_block_under(heading, text):
    """Return the language and body of the first fenced block after a ``##`` heading."""
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, f"README.md has no section {heading!r}"
    block = re.search(r"^```(\w*)\n(.*?)^```", section.group(1), re.M | re.S)
    assert block, f"section {heading!r} has no fenced code block"
    return block.group(1), block.group(2).strip()


@pytest.mark.parametrize("heading", COMMANDS)
def test_readme_command(heading):
    language, body = first_block_under(heading, README.read_text(encoding="utf-8"))
    assert language == "bash"
    assert body == COMMANDS[heading]


@pytest.mark.parametrize("command", COMMANDS.values())
def test_ci_runs_readme_command(command):
    lines = [line.strip() for line in CI_SCRIPT.read_text(encoding="utf-8").splitlines()]
    assert command in lines


def python_blocks(heading, text):
    """The ``python`` fenced blocks of the README section under ``## heading``."""
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, f"README.md has no section {heading!r}"
    return re.findall(r"^```python\n(.*?)^```", section.group(1), re.M | re.S)


@pytest.mark.slow  # the README script, ours and MDAnalysis's, on the whole system: about 8 s
def test_readme_replace_interrdf_in_a_script(tmp_path, monkeypatch):
    """The README's script runs as written, and the same script with MDAnalysis's import
    line gives the same g(r): replacing InterRDF is a one-line change."""
    pytest.importorskip("MDAnalysisTests")
    import numpy as np

    blocks = python_blocks("Use it from a script", README.read_text(encoding="utf-8"))
    old, new, script = blocks[0], blocks[1], blocks[2]
    assert old.strip() == "from MDAnalysis.analysis.rdf import InterRDF"
    assert new.strip() == "from mdakit_fastrdf import InterRDF"
    assert new.strip() in script
    script = script.replace("rdf.run()", "rdf.run(stop=1)")  # one frame for the test
    monkeypatch.chdir(tmp_path)
    ours, theirs = {}, {}
    exec(compile(script, "README (mdakit_fastrdf)", "exec"), ours)
    exec(compile(script.replace(new.strip(), old.strip()), "README (MDAnalysis)", "exec"),
         theirs)
    assert type(ours["rdf"]).__module__ == "mdakit_fastrdf.analysis.rdf"
    assert type(theirs["rdf"]).__module__ == "MDAnalysis.analysis.rdf"
    np.testing.assert_array_equal(ours["rdf"].results.bins, theirs["rdf"].results.bins)
    # single precision: a pair within float32 rounding of a bin edge may change bin (about
    # one in a million; docs/comparison.rst), so a few counts of ~10^7 may differ
    ours_count, theirs_count = ours["rdf"].results.count, theirs["rdf"].results.count
    assert np.abs(ours_count - theirs_count).sum() <= 1e-5 * theirs_count.sum()
    np.testing.assert_allclose(ours["rdf"].results.rdf, theirs["rdf"].results.rdf,
                               rtol=1e-3, atol=1e-6)


def test_readme_save_reload_plot(tmp_path, monkeypatch):
    """The README's save -> load -> plot block runs after its script, and writes files."""
    pytest.importorskip("MDAnalysisTests")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    text = README.read_text(encoding="utf-8")
    script = python_blocks("Use it from a script", text)[2]
    script = script.replace("rdf.run()", "rdf.run(stop=4)")
    save_block = python_blocks("Save, reload and plot", text)[0]
    save_block = save_block.replace(".run(blocks=5)", ".run(stop=4, blocks=2)")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(script, "README script", "exec"), namespace)
    exec(compile(save_block, "README save/load/plot", "exec"), namespace)
    assert (tmp_path / "rdf.csv").stat().st_size > 0
    assert (tmp_path / "rdf_reloaded.png").read_bytes().startswith(b"\x89PNG")
    assert namespace["data"].parameters["select1"] == "name OW"
    matplotlib.pyplot.close("all")
