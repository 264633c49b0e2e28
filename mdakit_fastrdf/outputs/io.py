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
import io as _io
import json
from pathlib import Path

import numpy as np
from MDAnalysis.analysis.results import Results

from .._version import __version__
from ..analysis.declarations import analysis_class, provides_output
from ..analysis.parameters import jsonable, run_parameters
from .data import RDFData, _as_data

__all__ = ["RDFData", "csv_paths", "load", "run_parameters", "save"]

FORMAT = "mdakit_fastrdf"
#: 2: CSV tables described by the header's "table" entry (version 1 files have none);
#: 3: CSV tables over several axes in files of their own (``sq.csv``, ``sq_gr.csv``), wide
#: columns, groups sharing rows (written only by such CSV files; the rest stay version 2).
FORMAT_VERSION = 3
_SUFFIXES = {".npz": "npz", ".csv": "csv", ".h5": "hdf5", ".hdf5": "hdf5"}


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


def _csv_files(spec, res):
    """The tables of each CSV file: ``{suffix: [Table]}``, suffix None for the file named
    and ``spec.csv_files[axis]`` for the tables over that axis (``sq_gr.csv``)."""
    files = {}
    for table in spec.tables:
        if any(name in res for name in table.fields):
            files.setdefault(spec.csv_files.get(table.axis), []).append(table)
    if None not in files:  # every table is over a companion's axis: the first is the main
        first = next(iter(files), None)
        files = {None: files.pop(first, [])} | files
    return files


def companion_path(path, suffix) -> Path:
    """The file of the rows over another axis: ``sq.csv`` and ``'gr'`` give ``sq_gr.csv``."""
    path = Path(path)
    return path.with_name(f"{path.stem}_{suffix}{path.suffix}")


def csv_paths(obj, filename) -> list:
    """The files :func:`save` writes for `obj` to CSV file `filename`: `filename`, then one
    per other axis of its tables (``sq.csv``, ``sq_gr.csv`` for a StructureFactor)."""
    data = _as_data(obj)
    files = _csv_files(data.cls.outputs, data.results)
    return [Path(filename)] + [companion_path(filename, s) for s in files if s is not None]


def _csv_entries(spec, res, table, norm):
    """The value columns of `table`: ``(column, tail, field, value, integer, about)`` for
    its fields, their standard errors, then their blocks (``tail``: ``''``, ``'_sem'``,
    ``'_block_<b>'``)."""
    main, sems, blocks = [], [], []
    for name in table.fields:
        if name not in res:
            continue
        field, column = spec.field(name), spec.column(name, table)
        integer = field is not None and field.integer
        text = field.about_for(norm) if field is not None else name
        main.append((column, "", name, res[name], integer, text))
        if name + "_sem" in res:
            sems.append((column, "_sem", name + "_sem", res[name + "_sem"], False,
                         f"standard error of the block mean of {column}"))
        if "block_" + name in res:
            for b, value in enumerate(_blocks(res["block_" + name])):
                blocks.append((column, f"_block_{b}", f"block_{name}.{b}", value, integer,
                               f"{column}, block {b}"))
    return main + sems + blocks


def _csv_tables(data, tables=None):
    """One CSV table: ``(columns, about, groups)``: columns of strings, their descriptions,
    and the description of each group of rows that :func:`_load_csv` reads back (its first
    row ``start``, row count and ``{field: [column(s), shape, integer, dtype]}``), from the
    analysis' declaration (`tables`: those of this file, default all).

    Tables over the same axis without label columns (and wide ones, :class:`Table`'s
    ``wide``) share their rows, one per x value; a labelled table adds rows of its own."""
    spec, res, norm = data.cls.outputs, data.results, data.norm
    tables = spec.tables if tables is None else tables
    edges = np.asarray(res.edges, dtype=np.float64)
    r_names = ["r_angstrom", "r_lo_angstrom", "r_hi_angstrom"]
    about = {"r_angstrom": "bin centre (Å)", "r_lo_angstrom": "lower bin edge (Å)",
             "r_hi_angstrom": "upper bin edge (Å)"}
    blocks = []  # [axis, flat, n_rows, {column: [str]}, [group]]
    label_names, x_names, value_names = [], [], []
    for table in tables:
        if not any(name in res for name in table.fields):
            continue
        entries = _csv_entries(spec, res, table, norm)
        if table.axis == "bins":
            x = {"r_angstrom": res.bins, "r_lo_angstrom": edges[:-1],
                 "r_hi_angstrom": edges[1:]}
        else:
            column = spec.column(table.axis)
            x = {column: np.asarray(res[table.axis], dtype=np.float64)}
            f = spec.field(table.axis)
            if f is not None:
                about.setdefault(column, f"{f.about} ({f.unit})" if f.unit else f.about)
        n_x = len(next(iter(x.values())))
        for name in x:
            if name not in x_names:
                x_names.append(name)
        cols, fields = {}, {}
        labels = {}
        if table.wide is not None:
            suffixes = [str(v) for v in table.wide(res)]
            for column, tail, key, value, integer, text in entries:
                arr = np.asarray(value)
                names = [f"{column}_{sfx}{tail}" for sfx in suffixes]
                for k, name in enumerate(names):
                    cols[name] = _fmt(arr[k], integer)
                    about.setdefault(name, f"{text} ({suffixes[k]})")
                fields[key] = [names, list(arr.shape), integer, arr.dtype.str]
            n_rows, reps = n_x, 1
        else:
            labels = table.labels(res) if table.labels is not None else {}
            n_rows = len(_flat(entries[0][3]))
            reps = n_rows // n_x
            for name, (values, text) in labels.items():
                if name not in label_names:
                    label_names.append(name)
                cols[name] = [v for v in values for _ in range(n_x)]
                if text:
                    about.setdefault(name, text)
            for column, tail, key, value, integer, text in entries:
                cols[column + tail] = _fmt(_flat(value), integer)
                about.setdefault(column + tail, text)
                fields[key] = [column + tail, _shape(value), integer, _dtype(value)]
        for name in cols:
            if name not in label_names and name not in value_names:
                value_names.append(name)
        for name, values in x.items():
            cols[name] = _fmt(np.tile(values, reps), False)
        group = {"rows": n_rows, "fields": fields}
        if table.axis != "bins":
            group["axis"] = spec.column(table.axis)
        flat = not labels
        shared = next((blk for blk in blocks if flat and blk[1] and blk[0] == table.axis
                       and blk[2] == n_rows), None)
        if shared is not None:
            shared[3].update(cols)
            shared[4].append(group)
        else:
            blocks.append([table.axis, flat, n_rows, cols, [group]])
    names = label_names + [n for n in r_names if n in x_names] + \
        [n for n in x_names if n not in r_names] + value_names
    columns = {name: [] for name in names}
    described, start = [], 0
    for _, _, n_rows, cols, groups in blocks:
        for name in names:
            columns[name].extend(cols.get(name, [""] * n_rows))
        for group in groups:
            described.append({"start": start, **group})
        start += n_rows
    return columns, about, described


def _write_table(path, first_line, columns, about):
    units = "; ".join(f"{name}: {text}" for name, text in about.items()
                      if text and name in columns)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(f"# mdakit-fastrdf {json.dumps(first_line, ensure_ascii=False)}\n")
        fh.write(f"# columns: {units}\n")
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(zip(*columns.values()))


def _save_csv(data, path):
    res = data.results
    files = _csv_files(data.cls.outputs, res)
    written, table = [], []
    for suffix, tables in files.items():
        columns, about, groups = _csv_tables(data, tables)
        target = path if suffix is None else companion_path(path, suffix)
        for group in groups:
            if suffix is not None:
                group["file"] = target.name
        table.extend(groups)
        written.append((suffix, target, columns, about))
    tabled = {f.split(".")[0] for group in table for f in group["fields"]}
    tabled |= {name[:-len("_uint64")] for name in tabled if name.endswith("_uint64")}
    header_results = Results({k: v for k, v in res.items() if k not in tabled})
    arrays, layout = _encode_results(header_results)
    header = _meta(data, layout)
    # version 3: tables in several files, wide columns, groups sharing rows
    if len(files) > 1 or any(isinstance(spec[0], list) for group in table
                             for spec in group["fields"].values()):
        header["format_version"] = 3
    header["arrays"] = _inline(arrays)
    header["table"] = table
    header["times"] = [repr(float(t)) for t in data.times.tolist()]
    for suffix, target, columns, about in written:
        if suffix is None:
            _write_table(target, header, columns, about)
        else:
            part = {"format": FORMAT, "format_version": header["format_version"],
                    "analysis": data.analysis, "part_of": path.name,
                    "about": f"the rows over {suffix} of {path.name}; load {path.name} (or "
                             f"this file) with mdakit_fastrdf.load"}
            _write_table(target, part, columns, about)


def _read_table(path):
    """The first line's JSON and the columns (``{name: [str]}``) of a CSV file."""
    with open(path, encoding="utf-8", newline="") as fh:
        first = fh.readline()
        tag = "# mdakit-fastrdf "
        if not first.startswith(tag):
            raise ValueError(f"{str(path)!r} was not written by mdakit_fastrdf (first line)")
        header = json.loads(first[len(tag):])
        body = "".join(line for line in fh if not line.startswith("#"))
    reader = csv.reader(_io.StringIO(body))
    names = next(reader)
    cols = {name: [] for name in names}
    for row in reader:
        for name, value in zip(names, row):
            cols[name].append(value)
    return header, cols


def _load_csv(path):
    header, cols = _read_table(path)
    _check_meta(header, path)
    if "part_of" in header:  # a companion (sq_gr.csv): read it with its main file
        main = Path(path).with_name(header["part_of"])
        if not main.exists():
            raise FileNotFoundError(
                f"{str(path)!r} holds only some of the tables of {str(main)!r}, which is "
                "missing: load needs both files, side by side")
        return _load_csv(main)
    if "table" not in header:
        raise ValueError(
            f"{str(path)!r} is a CSV file of format version "
            f"{header.get('format_version')}, whose table this version cannot read back; "
            "load the .npz or .h5 file of the same run, or run the analysis again")
    files = {None: cols}
    for group in header["table"]:
        name = group.get("file")
        if name is not None and name not in files:
            part = Path(path).with_name(name)
            if not part.exists():
                raise FileNotFoundError(f"{str(path)!r} keeps some of its tables in "
                                        f"{str(part)!r}, which is missing")
            files[name] = _read_table(part)[1]
    res = _decode_results(header["layout"], _uninline(header["arrays"]))
    def parse(raw, integer, dtype):
        return np.array([int(v) for v in raw] if integer else [float(v) for v in raw],
                        dtype=np.uint64 if integer else np.float64).astype(dtype)

    ends = {}  # files' next rows (version 2 groups have no "start")
    blocks = {}
    for group in header["table"]:
        cols = files[group.get("file")]
        start = group.get("start", ends.get(group.get("file"), 0))
        stop = start + group["rows"]
        ends[group.get("file")] = stop
        for field, (column, shape, integer, dtype) in group["fields"].items():
            if isinstance(column, list):  # wide: one column per leading index
                flat = np.concatenate([parse(cols[c][start:stop], integer, dtype)
                                       for c in column])
            else:
                flat = parse(cols[column][start:stop], integer, dtype)
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
    ends = {}
    for group in header["table"]:
        start = group.get("start", ends.get(group.get("file"), 0))
        ends[group.get("file")] = start + group["rows"]
        if "axis" not in group:
            cols = files[group.get("file")]
            shape = next(iter(group["fields"].values()))[1]
            nbins = shape[0][-1] if shape and isinstance(shape[0], list) else shape[-1]
            rows = slice(start, start + nbins)
            res.bins = np.array([float(v) for v in cols["r_angstrom"][rows]])
            res.edges = np.append(np.array([float(v) for v in cols["r_lo_angstrom"][rows]]),
                                  float(cols["r_hi_angstrom"][start + nbins - 1]))
            break
    # float64 twins of exact integer counts
    spec = analysis_class(header["analysis"]).outputs
    for f in spec.fields:
        if f.name.endswith("_uint64") and f.name in res and f.name[:-7] not in res:
            res[f.name[:-7]] = res[f.name].astype(np.float64)
    times = np.array([float(t) for t in header.get("times", [])], dtype=np.float64)
    return RDFData(header["analysis"], res, header["parameters"],
                   header["parameters"].get("frames"), times)
