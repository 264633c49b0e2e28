"""The encoding of results shared by every file format (npz, HDF5 and the CSV header):
nested lists of arrays laid out by path, JSON values, arrays inlined as JSON, units from
an analysis's declarations, and the format's metadata."""

from __future__ import annotations

import numpy as np
from MDAnalysis.analysis.results import Results

from .._version import __version__
from ..analysis.parameters import jsonable

FORMAT = "mdakit_fastrdf"
#: 2: CSV tables described by the header's "table" entry (version 1 files have none);
#: 3: CSV tables over several axes in files of their own (``sq.csv``, ``sq_gr.csv``), wide
#: columns, groups sharing rows (written only by such CSV files; the rest stay version 2).
FORMAT_VERSION = 3


# --------------------------------------------------------------------------------------
# generic encoding of results (npz, HDF5, and the CSV header)
# --------------------------------------------------------------------------------------

def _contains_array(value):
    if isinstance(value, np.ndarray):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_array(v) for v in value)
    return False


def _encode(value, path, arrays):
    """Layout of `value`; its arrays go into ``arrays[path...]``."""
    if isinstance(value, np.ndarray):
        arrays[path] = value
        return {"t": "array"}
    if isinstance(value, (list, tuple)) and _contains_array(value):
        return {"t": "list", "items": [_encode(v, f"{path}.{i}", arrays)
                                       for i, v in enumerate(value)]}
    tuples = (isinstance(value, list) and bool(value)
              and all(isinstance(v, tuple) for v in value))
    return {"t": "json", "v": jsonable(value), "tuples": tuples,
            "float": isinstance(value, (float, np.floating))}


def _decode(spec, path, arrays):
    if spec["t"] == "array":
        return arrays[path]
    if spec["t"] == "list":
        return [_decode(s, f"{path}.{i}", arrays) for i, s in enumerate(spec["items"])]
    value = spec["v"]
    if spec.get("tuples"):
        value = [tuple(v) for v in value]
    elif spec.get("float") and value is not None:
        value = float(value)
    return value


def _inline(arrays):
    """Arrays as JSON (dtype, shape, values) for the CSV header."""
    out = {}
    for path, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype.kind == "f":
            values = [repr(float(v)) for v in arr.ravel().tolist()]
        else:
            values = arr.ravel().tolist()
        out[path] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": values}
    return out


def _uninline(inlined):
    out = {}
    for path, entry in inlined.items():
        dtype = np.dtype(entry["dtype"])
        data = entry["data"]
        if dtype.kind == "f":
            data = [float(v) for v in data]
        out[path] = np.array(data, dtype=dtype).reshape(entry["shape"])
    return out


def _units(spec, name, norm):
    """Units of results field `name` (HDF5 attributes, CSV header) from the declaration
    `spec` of the analysis."""
    if name in ("n_frames", "block_n_frames"):
        return "frames"
    if name == "block_volume_cum":
        return "Å^3"
    field = spec.field(name)
    return "" if field is None else field.unit_for(norm)


def _meta(data, layout):
    return {"format": FORMAT, "format_version": 2, "analysis": data.analysis,
            "parameters": data.parameters, "layout": layout}


def _check_meta(meta, path):
    if meta.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} was not written by mdakit_fastrdf")
    if int(meta.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(
            f"{str(path)!r} has format version {meta['format_version']}, newer than this "
            f"mdakit_fastrdf ({__version__}) reads ({FORMAT_VERSION}): upgrade the package"
        )


def _encode_results(results):
    arrays, layout = {}, {}
    for name, value in results.items():
        layout[name] = _encode(value, name, arrays)
    return arrays, layout


def _decode_results(layout, arrays):
    res = Results()
    for name, spec in layout.items():
        res[name] = _decode(spec, name, arrays)
    return res
