"""mdakit_fastrdf: fast radial distribution functions for MDAnalysis.

``from mdakit_fastrdf import InterRDF`` replaces ``from MDAnalysis.analysis.rdf import
InterRDF``; the analysis runs on compiled multi-species pair-distance histogram kernels.

The package is layered (see the design page of the docs):

* :mod:`mdakit_fastrdf.analysis`: the analyses, each a thin subclass of one pair-histogram
  base class;
* :mod:`mdakit_fastrdf.engine`: devices, kernels and the compiled modules;
* :mod:`mdakit_fastrdf.backends`: the parallel backends over frames;
* :mod:`mdakit_fastrdf.outputs`: saving, loading, plotting and the command line.
"""

from ._version import __version__
from .analysis import (ComputeOptions, CylindricalRDF, DebyeScattering, DynamicStructureFactor, InterRDF,
                       InterRDF_s, IntermediateScattering, KirkwoodBuff, LateralRDF,
                       SpeciesRDF, StructureFactor, VanHove, first_shell)
from .backends import DaskDistributedBackend, NodeBackend
from .engine import build_info, cuda_devices
from .outputs.io import RDFData, load, save
from .outputs.plotting import plot

__all__ = [
    "InterRDF",
    "InterRDF_s",
    "LateralRDF",
    "CylindricalRDF",
    "SpeciesRDF",
    "KirkwoodBuff",
    "StructureFactor",
    "DebyeScattering",
    "IntermediateScattering",
    "DynamicStructureFactor",
    "VanHove",
    "first_shell",
    "ComputeOptions",
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
