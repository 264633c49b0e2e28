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

import csv
import datetime
import io as _io
import json
from pathlib import Path

import numpy as np
from MDAnalysis.analysis.results import Results

from .._version import __version__
from ..analysis.declarations import analysis_class

__all__ = ["RDFData", "load", "run_parameters", "save"]

FORMAT = "mdakit_fastrdf"
#: 2: CSV tables described by the header's "table" entry (version 1 files have none).
FORMAT_VERSION = 2
_SUFFIXES = {".npz": "npz", ".csv": "csv", ".h5": "hdf5", ".hdf5": "hdf5"}


# --------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# the object load() returns
# --------------------------------------------------------------------------------------

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
        from .plotting import plot

        return plot(self, ax=ax, **kwargs)

    def save(self, filename, format=None, *, metadata=None):
        """Write these results to another file (e.g. to convert CSV to HDF5)."""
        return save(self, filename, format=format, metadata=metadata)

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


def _meta(data, layout):
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "analysis": data.analysis,
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
        f.attrs["format_version"] = FORMAT_VERSION
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


# -- CSV ------------------------------------------------------------------------------

def _fmt(values, integer):
    values = np.asarray(values)
    if integer:
        return [str(v) for v in values.ravel().astype(np.uint64).tolist()]
    return [repr(v) for v in values.astype(np.float64).ravel().tolist()]


def _flat(value):
    """A per-bin field (array, or list of arrays) as one flat array, rows in order."""
    if isinstance(value, list):
        return np.concatenate([np.asarray(v).ravel() for v in value])
    return np.asarray(value).ravel()


def _shape(value):
    return [list(np.shape(v)) for v in value] if isinstance(value, list) else list(np.shape(value))


def _dtype(value):
    return np.asarray(value[0] if isinstance(value, list) else value).dtype.str


def _blocks(value):
    """The rows of a ``block_*`` field: (B, ...) array, or a list of (B, ...) arrays."""
    if isinstance(value, list):
        return [[np.asarray(v)[b] for v in value] for b in range(len(value[0]))]
    return [np.asarray(value)[b] for b in range(len(value))]


def _csv_tables(data):
    """The CSV table: ``(columns, about, table)``: columns of strings, their descriptions, and
    the description of each group of rows that :func:`_load_csv` reads back (its row count
    and ``{field: [column, shape, integer]}``), from the analysis' declaration."""
    spec, res, norm = data.cls.outputs, data.results, data.norm
    edges = np.asarray(res.edges, dtype=np.float64)
    columns, about, groups = {}, {}, []
    label_names, axis_names = [], []
    for table in spec.tables:
        if not any(name in res for name in table.fields):
            continue
        labels = table.labels(res) if table.labels is not None else {}
        for name in labels:
            if name not in label_names:
                label_names.append(name)
        # column -> (field, value, integer, description): the fields, their standard
        # errors, then their blocks
        main, sems, blocks = {}, {}, {}
        for name in table.fields:
            if name not in res:
                continue
            field, column = spec.field(name), spec.column(name, table)
            integer = field is not None and field.integer
            text = field.about_for(norm) if field is not None else name
            main[column] = (name, res[name], integer, text)
            if name + "_sem" in res:
                sems[column + "_sem"] = (name + "_sem", res[name + "_sem"], False,
                                         f"standard error of the block mean of {column}")
            if "block_" + name in res:
                for b, value in enumerate(_blocks(res["block_" + name])):
                    blocks[f"{column}_block_{b}"] = (f"block_{name}.{b}", value, integer,
                                                     f"{column}, block {b}")
        per_bin = {**main, **sems, **blocks}
        n_rows = len(_flat(next(iter(per_bin.values()))[1]))
        axis = None
        if table.axis != "bins":
            axis = (spec.column(table.axis), np.asarray(res[table.axis], dtype=np.float64))
            if axis[0] not in axis_names:
                axis_names.append(axis[0])
            f = spec.field(table.axis)
            if f is not None:
                about.setdefault(axis[0], f"{f.about} ({f.unit})" if f.unit else f.about)
        groups.append((n_rows, labels, per_bin, axis))
    # columns in order: labels, r, other axes, then the value columns of every group
    value_names = []
    for _, _, per_bin, _ in groups:
        for column in per_bin:
            if column not in value_names:
                value_names.append(column)
    r_names = ["r_angstrom", "r_lo_angstrom", "r_hi_angstrom"]
    names = label_names + r_names + axis_names + value_names
    columns = {name: [] for name in names}
    about.update({"r_angstrom": "bin centre (Å)", "r_lo_angstrom": "lower bin edge (Å)",
                  "r_hi_angstrom": "upper bin edge (Å)"})
    described = []
    for n_rows, labels, per_bin, axis in groups:
        n_x = len(res.bins) if axis is None else len(axis[1])
        reps = n_rows // n_x
        for name in label_names:
            values, text = labels.get(name, ([""] * reps, ""))
            columns[name].extend(v for v in values for _ in range(n_x))
            if text:
                about.setdefault(name, text)
        if axis is None:
            columns["r_angstrom"].extend(_fmt(np.tile(res.bins, reps), False))
            columns["r_lo_angstrom"].extend(_fmt(np.tile(edges[:-1], reps), False))
            columns["r_hi_angstrom"].extend(_fmt(np.tile(edges[1:], reps), False))
        else:
            for name in r_names:
                columns[name].extend([""] * n_rows)
        for name in axis_names:
            if axis is not None and name == axis[0]:
                columns[name].extend(_fmt(np.tile(axis[1], reps), False))
            else:
                columns[name].extend([""] * n_rows)
        fields = {}
        for name in value_names:
            if name in per_bin:
                field, value, integer, text = per_bin[name]
                columns[name].extend(_fmt(_flat(value), integer))
                about.setdefault(name, text)
                fields[field] = [name, _shape(value), integer, _dtype(value)]
            else:
                columns[name].extend([""] * n_rows)
        group = {"rows": n_rows, "fields": fields}
        if axis is not None:
            group["axis"] = axis[0]
        described.append(group)
    if not any(axis is None for *_, axis in groups):  # no per-bin rows: no r columns
        for name in r_names:
            del columns[name]
    return columns, about, described


def _save_csv(data, path):
    res = data.results
    columns, about, table = _csv_tables(data)
    tabled = {f.split(".")[0] for group in table for f in group["fields"]}
    tabled |= {name[:-len("_uint64")] for name in tabled if name.endswith("_uint64")}
    header_results = Results({k: v for k, v in res.items() if k not in tabled})
    arrays, layout = _encode_results(header_results)
    header = _meta(data, layout)
    header["arrays"] = _inline(arrays)
    header["table"] = table
    header["times"] = [repr(float(t)) for t in data.times.tolist()]
    units = "; ".join(f"{name}: {text}" for name, text in about.items()
                      if text and name in columns)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(f"# mdakit-fastrdf {json.dumps(header, ensure_ascii=False)}\n")
        fh.write(f"# columns: {units}\n")
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(zip(*columns.values()))


def _load_csv(path):
    with open(path, encoding="utf-8", newline="") as fh:
        first = fh.readline()
        tag = "# mdakit-fastrdf "
        if not first.startswith(tag):
            raise ValueError(f"{str(path)!r} was not written by mdakit_fastrdf (first line)")
        header = json.loads(first[len(tag):])
        _check_meta(header, path)
        if "table" not in header:
            raise ValueError(
                f"{str(path)!r} is a CSV file of format version "
                f"{header.get('format_version')}, whose table this version cannot read back; "
                "load the .npz or .h5 file of the same run, or run the analysis again")
        body = "".join(line for line in fh if not line.startswith("#"))
    reader = csv.reader(_io.StringIO(body))
    names = next(reader)
    cols = {name: [] for name in names}
    for row in reader:
        for name, value in zip(names, row):
            cols[name].append(value)
    res = _decode_results(header["layout"], _uninline(header["arrays"]))
    start = 0
    blocks = {}
    for k, group in enumerate(header["table"]):
        stop = start + group["rows"]
        for field, (column, shape, integer, dtype) in group["fields"].items():
            raw = cols[column][start:stop]
            flat = np.array([int(v) for v in raw] if integer else [float(v) for v in raw],
                            dtype=np.uint64 if integer else np.float64).astype(dtype)
            if shape and isinstance(shape[0], list):  # a list of arrays
                sizes = [int(np.prod(s)) for s in shape]
                parts = np.split(flat, np.cumsum(sizes)[:-1])
                value = [p.reshape(s) for p, s in zip(parts, shape)]
            else:
                value = flat.reshape(shape)
            if field.startswith("block_"):
                name, b = field.split(".")
                blocks.setdefault(name, {})[int(b)] = value
            else:
                res[field] = value
        start = stop
    for name, parts in blocks.items():
        rows = [parts[b] for b in sorted(parts)]
        if isinstance(rows[0], list):
            res[name] = [np.stack(v) for v in zip(*rows)]
        else:
            res[name] = np.stack(rows)
    # bin centres and edges from the first rows of the first per-bin group (without one,
    # the header holds them)
    start = 0
    for group in header["table"]:
        if "axis" not in group:
            shape = next(iter(group["fields"].values()))[1]
            nbins = shape[0][-1] if shape and isinstance(shape[0], list) else shape[-1]
            rows = slice(start, start + nbins)
            res.bins = np.array([float(v) for v in cols["r_angstrom"][rows]])
            res.edges = np.append(np.array([float(v) for v in cols["r_lo_angstrom"][rows]]),
                                  float(cols["r_hi_angstrom"][start + nbins - 1]))
            break
        start += group["rows"]
    # float64 twins of exact integer counts
    spec = analysis_class(header["analysis"]).outputs
    for f in spec.fields:
        if f.name.endswith("_uint64") and f.name in res and f.name[:-7] not in res:
            res[f.name[:-7]] = res[f.name].astype(np.float64)
    times = np.array([float(t) for t in header.get("times", [])], dtype=np.float64)
    return RDFData(header["analysis"], res, header["parameters"],
                   header["parameters"].get("frames"), times)
