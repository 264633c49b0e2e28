"""Sphinx configuration of the mdakit_fastrdf documentation."""

import re
from pathlib import Path

# The version has one source, mdakit_fastrdf/_version.py; read it without importing the
# (compiled) package, so that the docs build without it.
_VERSION_FILE = Path(__file__).resolve().parents[1] / "mdakit_fastrdf" / "_version.py"
__version__ = re.search(r'^__version__ = "([^"]+)"$', _VERSION_FILE.read_text(), re.M).group(1)

project = "mdakit_fastrdf"
author = "mdakit_fastrdf developers"
copyright = "2026, mdakit_fastrdf developers"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_mock_imports = []
autodoc_member_order = "bysource"

exclude_patterns = ["_build"]
html_theme = "alabaster"
html_theme_options = {
    "description": "Fast radial distribution functions for MDAnalysis",
}
