"""Sphinx configuration of the mdakit_fastrdf documentation."""

try:
    from mdakit_fastrdf import __version__
except ImportError:  # the docs are being built without the compiled package
    __version__ = "0.1.0"

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
