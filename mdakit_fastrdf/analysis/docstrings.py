"""Docstring text that several analyses share, written once.

A docstring names a shared block by a line holding only ``${NAME}``; :func:`render_docs`
replaces it by the block of :data:`SHARED`, indented as the line was. Applied to a class or
function when it is defined, so ``help()``, Sphinx and doctest read the rendered text.
"""

from __future__ import annotations

import re

__all__ = ["SHARED", "render_docs"]

#: The shared blocks, without indentation.
SHARED = {
    # the examples' demo systems (MDAnalysisTests' files)
    "ADK_WATER": """\
>>> import MDAnalysis as mda
>>> from MDAnalysisTests.datafiles import TPR, XTC
>>> u = mda.Universe(TPR, XTC)  # adenylate kinase in water, 10 frames""",
    "ADK_VACUUM": """\
>>> import MDAnalysis as mda
>>> from MDAnalysisTests.datafiles import PSF, DCD
>>> u = mda.Universe(PSF, DCD)  # adenylate kinase in vacuum, 98 frames""",
    # the Kirkwood-Buff functions' first parameters
    "EDGES_RDF": """\
edges : array_like
    Bin edges in Å, from 0.
rdf : array_like
    ``(..., nbins)`` :math:`g(r)`.""",
    "EDGES_KB_RDF": """\
edges : array_like
    Bin edges in Å, from 0.
rdf : array_like
    ``(..., nbins)`` :math:`g_{ab}` in the KB convention (:func:`rdf_from_counts`).""",
}

_PLACEHOLDER = re.compile(r"^([ \t]*)\$\{([A-Z_]+)\}[ \t]*$", re.MULTILINE)


def _render(text: str) -> str:
    def block(match):
        indent, name = match.groups()
        if name not in SHARED:
            raise KeyError(f"no shared docstring block {name!r} (known: {sorted(SHARED)})")
        return "\n".join(indent + line if line else line
                         for line in SHARED[name].splitlines())

    return _PLACEHOLDER.sub(block, text)


def render_docs(obj):
    """Decorator: the docstring of `obj` with every ``${NAME}`` line replaced by
    ``SHARED[NAME]`` at that line's indentation; an unknown name is a KeyError when the
    module is imported."""
    if obj.__doc__:
        obj.__doc__ = _render(obj.__doc__)
    return obj
