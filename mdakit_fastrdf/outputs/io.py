r"""Saving and loading results, with the parameters of the run beside the numbers.

Every analysis of the package (:class:`~mdakit_fastrdf.InterRDF`,
:class:`~mdakit_fastrdf.SpeciesRDF`, :class:`~mdakit_fastrdf.InterRDF_s`, and any analysis
built on :class:`~mdakit_fastrdf.analysis.base.PairHistogramBase`) can be written to

* ``.npz`` (NumPy, compressed; no extra dependency),
* ``.csv`` (a table with a header naming the columns and their units, readable by any
  spreadsheet, :func:`numpy.genfromtxt` or :func:`pandas.read_csv` with ``comment="#"``),
* ``.h5`` / ``.hdf5`` (HDF5 through h5py, the optional extra ``pip install
  "mdakit_fastrdf[hdf5]"``; one dataset per result with its units as an attribute, as
  CADISHI writes its histograms),

and read back with :func:`load`, which returns an :class:`RDFData` whose ``results`` hold
the same fields as the analysis' ``results`` (and can be plotted and saved again, e.g. to
convert a file). The run's parameters (:func:`run_parameters`: analysis, package version,
bins, range, normalisation, exclusions, device, precision, method, frames, backend, blocks,
group sizes, topology and trajectory files, ...) are stored in every format.

Round trips are exact: arrays keep their dtype and values (CSV numbers are written with
the shortest representation that reads back to the same float64).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..analysis.declarations import provides_output
from ..analysis.parameters import run_parameters
from .csv_table import _load_csv, _save_csv, csv_paths
from .data import RDFData, _as_data
from .encoding import (FORMAT, _check_meta, _decode_results, _encode_results, _meta,
                       _units)

__all__ = ["RDFData", "csv_paths", "load", "run_parameters", "save"]

_SUFFIXES = {".npz": "npz", ".csv": "csv", ".h5": "hdf5", ".hdf5": "hdf5"}


# --------------------------------------------------------------------------------------
# save / load
# --------------------------------------------------------------------------------------

def _format_of(path: Path, format):
    if format is not None:
        fmt = str(format).lower().lstrip(".")
        fmt = {"h5": "hdf5"}.get(fmt, fmt)
        if fmt not in ("npz", "csv", "hdf5"):
            raise ValueError(f"format must be 'npz', 'csv' or 'hdf5', got {format!r}")
        return fmt
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(
            f"cannot tell the format of {str(path)!r} from its suffix: use .npz, .csv, .h5 or "
            f".hdf5, or pass format='npz', 'csv' or 'hdf5'"
        )
    return fmt


@provides_output
def save(obj, filename, format=None, *, metadata=None) -> Path:
    """Save the results of an analysis (or of :func:`load`) with the run's parameters.

    Parameters
    ----------
    obj : InterRDF, SpeciesRDF, InterRDF_s or RDFData
        An analysis after :meth:`run`, or loaded data (to convert between formats).
    filename : str or pathlib.Path
        The file to write. The suffix picks the format: ``.npz``, ``.csv``, ``.h5`` or
        ``.hdf5`` (HDF5 needs h5py: ``pip install "mdakit_fastrdf[hdf5]"``).
    format : {'npz', 'csv', 'hdf5'}, optional
        The format, whatever the suffix.
    metadata : dict, optional
        Extra JSON-serialisable entries stored with the parameters, e.g.
        ``{"select1": "name OW"}`` (the groups' selection strings are not known to the
        analysis). They must not reuse a parameter's name.

    Returns
    -------
    pathlib.Path
        The file written.

    Notes
    -----
    *npz*: one array per results field (``results.<name>``, items of lists as
    ``results.<name>.<i>``), ``frames``, ``times`` and ``meta``, a JSON string with
    ``analysis``, ``parameters`` and the layout of the results. Read it with :func:`load`
    or with :func:`numpy.load` (``allow_pickle=False`` suffices).

    *csv*: line 1 is ``# mdakit-fastrdf {json}`` (the analysis, the parameters, and the
    results that are not per-bin tables), line 2 a comment naming the columns and their
    units, line 3 the column names, then one row per bin (per species pair and bin for
    SpeciesRDF, with ``pair = total`` rows for the total RDF; per site pair and bin for
    InterRDF_s). The columns are the per-bin results fields: ``r_angstrom`` (bin centre),
    ``r_lo_angstrom``, ``r_hi_angstrom`` (edges), ``rdf``, ``count`` (exact integers), and
    where present ``cdf``, ``coordination``, ``<field>_sem`` and ``<field>_block_<b>``.
    Results over another axis (q) get a file per axis, each with only its own columns:
    StructureFactor's ``sq.csv`` has one row per q (``q``, ``s``, ..., ``partials_O_H``,
    ...) and ``sq_gr.csv`` the partial g(r) (rows over r); DebyeScattering's second file
    is ``<name>_histogram.csv`` (:func:`csv_paths` lists them). :func:`load` reads either
    file and the other beside it.

    *hdf5*: root attributes ``format``, ``format_version``, ``analysis`` and
    ``parameters`` (JSON); group ``parameters`` with one attribute per parameter; group
    ``results`` with one dataset per array (items of lists in subgroups ``0``, ``1``, ...)
    carrying a ``units`` attribute, the other fields as JSON attributes; datasets ``frames``
    and ``times``.
    """
    path = Path(filename)
    fmt = _format_of(path, format)
    data = _as_data(obj, metadata)
    if fmt == "npz":
        _save_npz(data, path)
    elif fmt == "csv":
        _save_csv(data, path)
    else:
        _save_hdf5(data, path)
    return path


def load(filename, format=None) -> RDFData:
    """Read results written by :func:`save` (or ``mdakit-fastrdf -o``).

    Parameters
    ----------
    filename : str or pathlib.Path
        A ``.npz``, ``.csv``, ``.h5`` or ``.hdf5`` file.
    format : {'npz', 'csv', 'hdf5'}, optional
        The format, whatever the suffix.

    Returns
    -------
    RDFData
        ``.results`` with the same fields as the analysis' results, ``.parameters``,
        ``.frames``, ``.times``, and :meth:`RDFData.plot`.

    Examples
    --------
    >>> import mdakit_fastrdf
    >>> data = mdakit_fastrdf.load("rdf.npz")  # doctest: +SKIP
    >>> data.results.rdf, data.parameters["nbins"]  # doctest: +SKIP
    >>> ax = data.plot(coordination=True)  # doctest: +SKIP
    """
    path = Path(filename)
    fmt = _format_of(path, format)
    if fmt == "npz":
        return _load_npz(path)
    if fmt == "csv":
        return _load_csv(path)
    return _load_hdf5(path)


# -- npz ------------------------------------------------------------------------------

def _save_npz(data, path):
    arrays, layout = _encode_results(data.results)
    payload = {f"results.{k}": v for k, v in arrays.items()}
    payload["frames"] = data.frames
    payload["times"] = data.times
    payload["meta"] = np.array(json.dumps(_meta(data, layout)))
    with open(path, "wb") as fh:  # keep the name as given (np.savez would append .npz)
        np.savez_compressed(fh, **payload)


def _load_npz(path):
    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z.files:
            raise ValueError(f"{str(path)!r} was not written by mdakit_fastrdf (no 'meta')")
        meta = json.loads(str(z["meta"]))
        _check_meta(meta, path)
        arrays = {k[len("results."):]: z[k] for k in z.files if k.startswith("results.")}
        frames, times = z["frames"], z["times"]
    results = _decode_results(meta["layout"], arrays)
    return RDFData(meta["analysis"], results, meta["parameters"], frames, times)


# -- HDF5 -----------------------------------------------------------------------------

def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError(
            "HDF5 output needs h5py: pip install h5py (or pip install "
            "\"mdakit_fastrdf[hdf5]\"); .npz and .csv need nothing more"
        ) from None
    return h5py


def _save_hdf5(data, path):
    h5py = _h5py()
    arrays, layout = _encode_results(data.results)
    with h5py.File(path, "w") as f:
        meta = _meta(data, layout)
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = meta["format_version"]
        f.attrs["analysis"] = data.analysis
        f.attrs["parameters"] = json.dumps(data.parameters)
        f.attrs["layout"] = json.dumps(meta["layout"])
        params = f.create_group("parameters")
        for key, value in data.parameters.items():
            plain = isinstance(value, (int, float, str)) and not isinstance(value, bool)
            params.attrs[key] = value if plain else json.dumps(value)
        res = f.create_group("results")
        for name, arr in arrays.items():
            big = arr.size >= 4096
            ds = res.create_dataset(name.replace(".", "/"), data=arr,
                                    compression="gzip" if big else None)
            ds.attrs["units"] = _units(data.cls.outputs, name.split(".")[0], data.norm)
        for name, spec in layout.items():
            if spec["t"] == "json":
                res.attrs[name] = json.dumps(spec["v"])
        f.create_dataset("frames", data=data.frames)
        ds = f.create_dataset("times", data=data.times)
        ds.attrs["units"] = "ps"


def _load_hdf5(path):
    h5py = _h5py()
    with h5py.File(path, "r") as f:
        meta = {"format": f.attrs.get("format"), "format_version": f.attrs.get("format_version")}
        _check_meta(meta, path)
        layout = json.loads(f.attrs["layout"])
        parameters = json.loads(f.attrs["parameters"])
        analysis = str(f.attrs["analysis"])
        arrays = {}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                arrays[name.replace("/", ".")] = obj[()]

        f["results"].visititems(visit)
        frames, times = f["frames"][()], f["times"][()]
    return RDFData(analysis, _decode_results(layout, arrays), parameters, frames, times)
