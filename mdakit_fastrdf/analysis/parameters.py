"""The parameters of a run, as the JSON-serialisable dict saved beside its numbers.

:func:`run_parameters` reads an analysis after its run (the analysis layer's
:meth:`~mdakit_fastrdf.analysis.base.PairHistogramBase.parameters` returns it), and
:func:`jsonable` turns values into plain JSON types. Both live in the analysis layer, below
the outputs that store them (:mod:`mdakit_fastrdf.outputs.io` imports them from here), so
that no analysis imports the outputs.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np

from .._version import __version__

__all__ = ["jsonable", "run_parameters"]


def jsonable(value):
    """``value`` as plain JSON types (numpy scalars and arrays to Python, tuples to lists)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def run_parameters(analysis) -> dict:
    """The parameters of the last run of `analysis`, as a JSON-serialisable dict.

    Keys: ``analysis`` (class name), ``version`` (of mdakit_fastrdf), ``mdanalysis_version``,
    ``created`` (UTC), ``nbins``, ``range``, ``norm``, ``device`` (asked for),
    ``device_used`` (where the kernel ran, when this process ran it), ``precision``,
    ``method``, ``n_threads``, ``start``, ``stop``, ``step``, ``backend``, ``n_workers``,
    ``n_parts``, ``blocks``, ``n_frames``, ``frames`` (the frame indices),
    ``topology``/``trajectory`` (file names, when known), and what the analysis adds
    (``_output_parameters``: the exclusions and group sizes of InterRDF, the species and
    their sizes of SpeciesRDF, the sizes of the site groups of InterRDF_s, ...).

    Parameters
    ----------
    analysis : InterRDF, SpeciesRDF, InterRDF_s or another analysis of the package
        An analysis after :meth:`run`.

    Returns
    -------
    dict
    """
    import MDAnalysis

    kind = type(analysis).__name__
    if not getattr(analysis, "_run_options", None) or "edges" not in analysis.results:
        raise RuntimeError(f"{kind} has no results yet: call run() before saving them")
    universe = analysis._universe
    engine = getattr(analysis, "_engine", None)
    options = dict(getattr(analysis, "_run_options", {}) or {})
    p = {
        "analysis": kind,
        "version": __version__,
        "mdanalysis_version": MDAnalysis.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nbins": int(analysis.rdf_settings["bins"]),
        "range": [float(v) for v in analysis.rdf_settings["range"]],
        "norm": analysis.norm,
        "device": analysis.device,
        "device_used": getattr(engine, "device_used", None),
        "precision": analysis.precision,
        "method": analysis.method,
        "n_threads": analysis.n_threads,
    }
    for key in ("start", "stop", "step", "backend", "n_workers", "n_parts", "blocks"):
        p[key] = jsonable(options.get(key))
    p["n_frames"] = int(analysis.n_frames)
    p["frames"] = [int(f) for f in np.asarray(analysis.frames)]
    p["topology"] = jsonable(getattr(universe, "filename", None))
    p["trajectory"] = jsonable(getattr(universe.trajectory, "filename", None))
    p.update(jsonable(analysis._output_parameters()))
    return p
