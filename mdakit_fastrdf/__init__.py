"""mdakit_fastrdf: fast radial distribution functions for MDAnalysis.

``from mdakit_fastrdf import InterRDF`` replaces ``from MDAnalysis.analysis.rdf import
InterRDF``; the analysis runs on compiled multi-species pair-distance histogram kernels.
"""

from importlib.metadata import PackageNotFoundError, version

from ._engine import build_info, cuda_devices
from .backends import DaskDistributedBackend, NodeBackend
from .rdf import InterRDF
from .rdf_s import InterRDF_s
from .species import SpeciesRDF

try:
    __version__ = version("mdakit_fastrdf")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "InterRDF", "InterRDF_s", "SpeciesRDF", "NodeBackend", "DaskDistributedBackend",
    "build_info", "cuda_devices", "__version__",
]
