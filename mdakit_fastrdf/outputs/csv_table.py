"""CSV files of results: one table (or several, over other axes, in files of their own)
with a header naming the columns and their units, the run's parameters and the layout
(:mod:`.encoding`) in comment lines; numbers written with the shortest representation that
reads back to the same float64."""

from __future__ import annotations

import csv
import io as _io
import json
from pathlib import Path

import numpy as np
from MDAnalysis.analysis.results import Results

from ..analysis.declarations import analysis_class
from .data import RDFData, _as_data
from .encoding import (FORMAT, _check_meta, _decode_results, _encode_results, _inline, _meta,
                       _uninline)

__all__ = ["companion_path", "csv_paths"]




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
