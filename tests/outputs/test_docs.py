"""The Python code of the quick start and of the outputs page runs as written.

Every ``.. code-block:: python`` of the pages in ``PAGES`` runs, in the order of the page
and in one namespace per page (a block may use the names of the blocks above it, as a
reader does), in a temporary working directory, with matplotlib's Agg backend. As in
tests/outputs/test_readme.py, the only change made to the code is the number of frames: each
``.run(...)`` analyses the first ``N_FRAMES`` frames of the demo trajectory.

A block that cannot run everywhere carries a visible rst comment on the line before it
(blank lines between are allowed)::

    .. docs-test: requires pandas    (runs when pandas can be imported)
    .. docs-test: skip <reason>      (never runs)

A block left out is reported as a warning. Bare ``::`` literal blocks are not allowed on
these pages: code must be in a ``code-block`` with its language, so that it is run here
(``python``) or deliberately not (``bash``, ...).
"""

import importlib.util
import re
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = ("quickstart.rst", "outputs.rst")
N_FRAMES = 5  # the demo trajectory has 10; the pages use run(blocks=5)

#: files that the code of each page writes (checked after it ran)
WRITES = {
    "quickstart.rst": ("rdf.npz", "rdf.png"),
    "outputs.rst": ("rdf.csv", "rdf.png"),
}

_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\. (?:code-block|code|sourcecode)::\s*(?P<lang>\S*)\s*$")
_MARKER = re.compile(r"^\s*\.\. docs-test:\s*(?P<what>\S+)\s*(?P<arg>.*?)\s*$")
_OPTION = re.compile(r"^\s+:[\w-]+:")


@dataclass
class Block:
    page: str
    line: int  # line of the directive (1-based)
    language: str
    code: str  # dedented, preceded by blank lines so that line numbers are the page's
    marker: tuple = None  # ("requires", "pandas") or ("skip", reason)


def _indent(line):
    return len(line) - len(line.lstrip())


def code_blocks(text, page="<rst>"):
    """All code blocks of an rst text, in order, with their ``docs-test`` markers."""
    lines = text.splitlines()
    blocks, pending, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        marker = _MARKER.match(line)
        if marker:
            what, arg = marker.group("what"), marker.group("arg")
            assert what in ("requires", "skip"), (
                f"{page}:{i + 1}: unknown marker 'docs-test: {what}' (requires MODULE... | skip REASON)")
            assert arg, f"{page}:{i + 1}: 'docs-test: {what}' needs {'modules' if what == 'requires' else 'a reason'}"
            pending = (what, arg, i + 1)
            i += 1
            continue
        directive = _DIRECTIVE.match(line)
        if directive:
            indent = len(directive.group("indent"))
            j = i + 1
            while j < len(lines) and _OPTION.match(lines[j]):
                j += 1
            start = j
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > indent):
                j += 1
            body = textwrap.dedent("\n".join(lines[start:j]))
            blocks.append(Block(page, i + 1, directive.group("lang"),
                                "\n" * start + body + "\n",
                                pending[:2] if pending else None))
            pending, i = None, j
            continue
        assert pending is None or not line.strip(), (
            f"{page}:{pending[2]}: a 'docs-test' marker must come right before a code block")
        i += 1
    assert pending is None, f"{page}:{pending[2]}: 'docs-test' marker after the last code block"
    return blocks


def python_blocks(page):
    blocks = [b for b in code_blocks((DOCS / page).read_text(encoding="utf-8"), page)
              if b.language in ("python", "python3", "py")]
    assert blocks, f"docs/{page} has no python code block"
    return blocks


def literal_blocks(text):
    """Line numbers of bare ``::`` literal blocks (a paragraph ending in ``::``)."""
    return [n for n, line in enumerate(text.splitlines(), 1)
            if line.rstrip().endswith("::") and not line.lstrip().startswith(".. ")]


def few_frames(code):
    """Make every ``.run(...)`` of the code analyse the first N_FRAMES frames only."""
    assert "stop=" not in code and "frames=" not in code, "the block chooses its frames"
    code = re.sub(r"\.run\(\s*\)", f".run(stop={N_FRAMES})", code)
    return re.sub(r"\.run\((?!stop=)", f".run(stop={N_FRAMES}, ", code)


def test_code_blocks_parser():
    text = textwrap.dedent("""\
        Title
        =====

        .. code-block:: python
           :caption: one

           x = 1
           if x:
               y = 2

        Item
           .. docs-test: requires some_module other_module

           .. code-block:: python

              z = 3

        .. code-block:: bash

           mdakit-fastrdf --help
        """)
    blocks = code_blocks(text)
    assert [(b.line, b.language, b.marker) for b in blocks] == [
        (4, "python", None), (14, "python", ("requires", "some_module other_module")),
        (18, "bash", None)]
    assert blocks[0].code.lstrip("\n") == "x = 1\nif x:\n    y = 2\n\n"
    # the code keeps the line numbers of the page (tracebacks point into the rst)
    assert blocks[1].code.splitlines()[15] == "z = 3"
    assert few_frames("r.run()\nr.run(blocks=5)") == (
        f"r.run(stop={N_FRAMES})\nr.run(stop={N_FRAMES}, blocks=5)")
    with pytest.raises(AssertionError, match="right before a code block"):
        code_blocks(".. docs-test: skip why\n\nSome text.\n\n.. code-block:: python\n\n   x\n")
    with pytest.raises(AssertionError, match="unknown marker"):
        code_blocks(".. docs-test: maybe\n\n.. code-block:: python\n\n   x\n")


@pytest.mark.parametrize("page", PAGES)
def test_page_has_no_bare_literal_blocks(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    assert literal_blocks(text) == [], (
        f"docs/{page}: use '.. code-block:: python' (or another language) instead of '::'")


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page, tmp_path, monkeypatch):
    """Run the page's Python blocks in order, as a reader would paste them."""
    pytest.importorskip("MDAnalysisTests")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    left_out = []
    try:
        for block in python_blocks(page):
            if block.marker and block.marker[0] == "skip":
                left_out.append(f"docs/{page}:{block.line} (skip: {block.marker[1]})")
                continue
            if block.marker:  # requires
                missing = [name for name in block.marker[1].split()
                           if importlib.util.find_spec(name) is None]
                if missing:
                    left_out.append(f"docs/{page}:{block.line} (needs {', '.join(missing)})")
                    continue
            exec(compile(few_frames(block.code), str(DOCS / page), "exec"), namespace)
    finally:
        plt.close("all")
    for name in WRITES[page]:
        assert (tmp_path / name).stat().st_size > 0, f"docs/{page} should write {name}"
    assert (tmp_path / "rdf.png").read_bytes().startswith(b"\x89PNG")
    assert type(namespace["rdf"]).__module__ == "mdakit_fastrdf.analysis.rdf"
    assert namespace["data"].parameters["n_frames"] == N_FRAMES
    assert namespace["rdf"].results.rdf_sem.shape == namespace["rdf"].results.rdf.shape
    if left_out:
        warnings.warn(f"code blocks not run: {'; '.join(left_out)}", stacklevel=1)
