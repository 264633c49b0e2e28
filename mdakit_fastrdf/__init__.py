"""mdakit_fastrdf: fast radial distribution functions for MDAnalysis.

``from mdakit_fastrdf import InterRDF`` replaces ``from MDAnalysis.analysis.rdf import
InterRDF``; the analysis runs on compiled multi-species pair-distance histogram kernels.
"""

from ._engine import build_info, cuda_devices
from ._version import __version__
from .backends import DaskDistributedBackend, NodeBackend
from .io import RDFData, load, save
from .plotting import plot
from .rdf import InterRDF
from .rdf_s import InterRDF_s
from .species import SpeciesRDF

__all__ = [
    "InterRDF",
    "InterRDF_s",
    "SpeciesRDF",
    "NodeBackend",
    "DaskDistributedBackend",
    "RDFData",
    "build_info",
    "cuda_devices",
    "load",
    "plot",
    "save",
    "__version__",
]
