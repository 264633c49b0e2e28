"""Every module of the package compiles without a warning: an invalid escape in a docstring
(``"\\p"``) is printed as a SyntaxWarning to every user whose Python compiles the file (the
GPU machines' test logs showed one from analysis/declarations.py)."""

import pathlib
import warnings

import pytest

import mdakit_fastrdf

FILES = sorted(pathlib.Path(mdakit_fastrdf.__file__).parent.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_module_compiles_without_warnings(path):
    source = path.read_text(encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(source, str(path), "exec")
