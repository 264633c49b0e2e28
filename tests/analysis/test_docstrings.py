"""Shared docstring blocks: rendered into every docstring that names them, at its indent."""

import inspect

import pytest

import mdakit_fastrdf
from mdakit_fastrdf.analysis import kb_integrals, kb_limit
from mdakit_fastrdf.analysis.docstrings import SHARED, render_docs


def test_no_placeholder_left_in_the_package():
    objects = [getattr(mdakit_fastrdf, n) for n in mdakit_fastrdf.__all__]
    objects += [f for m in (kb_integrals, kb_limit) for _, f in inspect.getmembers(m)
                if inspect.isfunction(f) and f.__module__ == m.__name__]
    docs = [o.__doc__ or "" for o in objects]
    assert not [d for d in docs if "${" in d]
    assert any(SHARED["ADK_WATER"].splitlines()[1] in d for d in docs)


def test_rendered_at_the_placeholders_indent():
    @render_docs
    def f():
        """Text.

        Examples
        --------
        ${ADK_VACUUM}
        >>> u.atoms.n_atoms
        """

    lines = f.__doc__.splitlines()
    start = lines.index("        >>> import MDAnalysis as mda")
    assert lines[start + 1] == "        >>> from MDAnalysisTests.datafiles import PSF, DCD"
    assert lines[start + 3] == "        >>> u.atoms.n_atoms"


def test_unknown_block_is_an_error():
    def g():
        """${NO_SUCH_BLOCK}"""

    with pytest.raises(KeyError, match="NO_SUCH_BLOCK"):
        render_docs(g)
