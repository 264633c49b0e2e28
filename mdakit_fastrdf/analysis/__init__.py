"""The analyses: each is a thin subclass of :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase`."""

from .compute import ComputeOptions
from .rdf import InterRDF
from .shells import FirstShell, first_shell
from .lateral import LateralRDF
from .cylindrical import CylindricalRDF
from .rdf_s import InterRDF_s
from .species import SpeciesRDF
from .kirkwood_buff import KirkwoodBuff
from .structure_factor import StructureFactor
from .debye import DebyeScattering
from .intermediate_scattering import IntermediateScattering
from .dynamic_structure_factor import DynamicStructureFactor
from .van_hove import VanHove

__all__ = ["ComputeOptions", "CylindricalRDF", "DebyeScattering", "DynamicStructureFactor", "FirstShell",
           "InterRDF", "InterRDF_s", "IntermediateScattering", "KirkwoodBuff", "LateralRDF",
           "SpeciesRDF", "StructureFactor", "VanHove", "first_shell"]
