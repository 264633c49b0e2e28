"""The results that saving, loading and plotting share: :class:`RDFData`.

:func:`~mdakit_fastrdf.load` returns an :class:`RDFData`, and :func:`~mdakit_fastrdf.save`
and :func:`~mdakit_fastrdf.plot` take one (or an analysis, seen through :func:`_as_data`).
This module imports neither :mod:`~mdakit_fastrdf.outputs.io` nor
:mod:`~mdakit_fastrdf.outputs.plotting`: both import it. The methods :meth:`RDFData.save`
and :meth:`RDFData.plot` still call those modules' functions: io and plotting provide them
when imported (``import mdakit_fastrdf`` imports both) to
:func:`~mdakit_fastrdf.analysis.declarations.output_function`, the same lookup as the
analyses' ``save()`` and ``plot()``, so that the methods stay documented on the class and no
import (deferred ones included) goes back up from here.
"""

from __future__ import annotations

import numpy as np

from ..analysis.declarations import analysis_class, output_function
from ..analysis.parameters import jsonable, run_parameters

__all__ = ["RDFData"]


class RDFData:
    """Results read back from a file by :func:`load` (or taken from an analysis).

    Attributes
    ----------
    analysis : str
        The name of the analysis class that computed them (``'InterRDF'``,
        ``'SpeciesRDF'``, ``'InterRDF_s'``, ...).
    results : MDAnalysis.analysis.results.Results
        The same fields as the analysis' ``results`` (``bins``, ``edges``, ``count``,
        ``rdf``, ..., and ``block_*``/``*_sem`` after a run with blocks).
    parameters : dict
        The parameters of the run (see :func:`run_parameters`) and any ``metadata`` given to
        :func:`save`.
    frames, times : numpy.ndarray
        Frame indices and times (ps) of the analysed frames.
    """

    def __init__(self, analysis, results, parameters, frames=None, times=None):
        self.cls = analysis_class(analysis)  # ValueError for an unknown name
        self.analysis = analysis
        self.results = results
        self.parameters = parameters
        self.frames = np.asarray(parameters.get("frames", []) if frames is None else frames,
                                 dtype=np.int64)
        self.times = np.asarray([] if times is None else times, dtype=np.float64)

    @property
    def n_frames(self) -> int:
        """Number of analysed frames."""
        return int(self.parameters["n_frames"])

    @property
    def norm(self) -> str:
        """The normalisation: ``'rdf'``, ``'density'`` or ``'none'``."""
        return self.parameters["norm"]

    @property
    def species(self):
        """Species labels (analyses with species, such as SpeciesRDF)."""
        return self.results.species

    def partial(self, a, b):
        """The partial of species `a` with species `b`, as
        :meth:`mdakit_fastrdf.SpeciesRDF.partial` (analyses with species pairs only)."""
        partial = getattr(self.cls, "_partial", None)
        if partial is None:
            raise TypeError(f"partial() needs results with species pairs (e.g. SpeciesRDF); "
                            f"these are {self.analysis} results")
        return partial(self.results, a, b)

    def plot(self, ax=None, **kwargs):
        """Plot (see :func:`mdakit_fastrdf.plot`); returns the matplotlib Axes."""
        return output_function("plot")(self, ax=ax, **kwargs)

    def save(self, filename, format=None, *, metadata=None):
        """Write these results to another file (e.g. to convert CSV to HDF5)."""
        return output_function("save")(self, filename, format=format, metadata=metadata)

    def __repr__(self):
        return (f"<RDFData {self.analysis}: {self.parameters.get('nbins')} bins, "
                f"{self.n_frames} frames, norm={self.norm!r}>")


def _as_data(obj, metadata=None) -> RDFData:
    """An :class:`RDFData` view of an analysis (after run) or of loaded data."""
    if isinstance(obj, RDFData):
        data = obj
        parameters = dict(obj.parameters)
    else:
        parameters = run_parameters(obj)
        data = RDFData(type(obj).__name__, obj.results, parameters,
                       np.asarray(obj.frames), np.asarray(obj.times))
    if metadata:
        metadata = jsonable(dict(metadata))
        clash = sorted(k for k, v in metadata.items() if k in parameters and parameters[k] != v)
        if clash:
            raise ValueError(f"metadata must not change the run's parameters {clash}")
        parameters = {**parameters, **metadata}
    return RDFData(data.analysis, data.results, parameters, data.frames, data.times)
