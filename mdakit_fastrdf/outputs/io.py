r"""Saving and loading results, with the parameters of the run beside the numbers.

Every analysis of the package (:class:`~mdakit_fastrdf.InterRDF`,
:class:`~mdakit_fastrdf.SpeciesRDF`, :class:`~mdakit_fastrdf.InterRDF_s`) can be written to

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

__all__ = ["RDFData", "load", "run_parameters", "save"]

FORMAT = "mdakit_fastrdf"
FORMAT_VERSION = 1
_SUFFIXES = {".npz": "npz", ".csv": "csv", ".h5": "hdf5", ".hdf5": "hdf5"}
_EXCLUDE_SAME_NAMES = {"resindices": "residue", "segindices": "segment", "chainIDs": "chain"}
_NORM_UNITS = {"rdf": "1", "density": "Å^-3", "none": "pairs per frame"}
_NORM_QUANTITY = {"rdf": "g(r) (dimensionless)", "density": "radial density (Å^-3)",
                  "none": "pairs per frame"}
_ANALYSES = ("InterRDF", "SpeciesRDF", "InterRDF_s")


# --------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------

def _jsonable(value):
    """``value`` as plain JSON types (numpy scalars and arrays to Python, tuples to lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
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
    ``created`` (UTC), ``nbins``, ``range``, ``norm``, the exclusions (``exclusion_block``
    and ``exclude_same`` for InterRDF; ``exclude_same`` and ``exclude_self`` for SpeciesRDF),
    ``device`` (asked for), ``device_used`` (where the kernel ran, when this process ran it),
    ``precision``, ``method``, ``n_threads``, ``start``, ``stop``, ``step``, ``backend``,
    ``n_workers``, ``n_parts``, ``blocks``, ``n_frames``, ``frames`` (the frame indices),
    the group sizes (``n_atoms1``/``n_atoms2``, the species and their sizes, or the sizes
    of the site groups), and ``topology``/``trajectory`` (file names, when known).

    Parameters
    ----------
    analysis : InterRDF, SpeciesRDF or InterRDF_s
        An analysis after :meth:`run`.

    Returns
    -------
    dict
    """
    import MDAnalysis

    kind = type(analysis).__name__
    if "rdf" not in analysis.results:
        raise RuntimeError(f"{kind} has no results yet: call run() before saving them")
    p = {
        "analysis": kind,
        "version": __version__,
        "mdanalysis_version": MDAnalysis.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nbins": int(analysis.rdf_settings["bins"]),
        "range": [float(v) for v in analysis.rdf_settings["range"]],
        "norm": analysis.norm,
    }
    if kind == "InterRDF":
        block = analysis._exclusion_block
        p["exclusion_block"] = None if block is None else [int(v) for v in block]
        p["exclude_same"] = _EXCLUDE_SAME_NAMES.get(analysis.exclude_same)
        p["n_atoms1"], p["n_atoms2"] = len(analysis.g1), len(analysis.g2)
        universe = analysis.g1.universe
    elif kind == "SpeciesRDF":
        p["exclude_same"] = analysis.exclude_same
        p["exclude_self"] = analysis.exclude_self
        p["species"] = _jsonable(analysis.species)
        p["n_atoms"] = [len(g) for g in analysis.groups]
        universe = analysis.atomgroup.universe
    else:
        p["group_sizes"] = [[len(a), len(b)] for a, b in analysis.ags]
        universe = analysis.ags[0][0].universe
    engine = getattr(analysis, "_engine", None)
    p["device"] = analysis.device
    p["device_used"] = getattr(engine, "device_used", None) if kind != "InterRDF_s" else "cpu"
    p["precision"] = analysis.precision
    p["method"] = getattr(analysis, "method", "sites")
    p["n_threads"] = analysis.n_threads
    options = dict(getattr(analysis, "_run_options", {}) or {})
    for key in ("start", "stop", "step", "backend", "n_workers", "n_parts", "blocks"):
        p[key] = _jsonable(options.get(key))
    p["n_frames"] = int(analysis.n_frames)
    p["frames"] = [int(f) for f in np.asarray(analysis.frames)]
    p["topology"] = _jsonable(getattr(universe, "filename", None))
    p["trajectory"] = _jsonable(getattr(universe.trajectory, "filename", None))
    return p


# --------------------------------------------------------------------------------------
# the object load() returns
# --------------------------------------------------------------------------------------

class RDFData:
    """Results read back from a file by :func:`load` (or taken from an analysis).

    Attributes
    ----------
    analysis : str
        ``'InterRDF'``, ``'SpeciesRDF'`` or ``'InterRDF_s'``: the class that computed them.
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
        if analysis not in _ANALYSES:
            raise ValueError(f"unknown analysis {analysis!r}; expected one of {_ANALYSES}")
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
        """Species labels (SpeciesRDF only)."""
        return self.results.species

    def partial(self, a, b):
        """The partial of species `a` with species `b` (SpeciesRDF), as
        :meth:`mdakit_fastrdf.SpeciesRDF.partial`."""
        if self.analysis != "SpeciesRDF":
            raise TypeError(f"partial() needs SpeciesRDF results, these are {self.analysis}")
        res = self.results
        ia, ib = _species_index(res.species, a), _species_index(res.species, b)
        k = _pair_index(res.pairs, ia, ib)
        return Results(
            index=k, species=(res.species[ia], res.species[ib]), count=res.count[k],
            count_uint64=res.count_uint64[k], rdf=res.rdf[k], cdf=res.cdf[k],
            coordination=res.cdf[k] / res.n_atoms[ia], n_pairs=int(res.n_pairs[k]),
        )

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


def _species_index(species, label):
    for k, s in enumerate(species):
        if s == label:
            return k
    lowered = [k for k, s in enumerate(species)
               if isinstance(s, str) and isinstance(label, str) and s.lower() == label.lower()]
    if len(lowered) == 1:
        return lowered[0]
    raise KeyError(f"no species {label!r}; the species are {species!r}")


def _pair_index(pairs, a, b):
    pairs = np.asarray(pairs)
    hit = np.flatnonzero(((pairs[:, 0] == a) & (pairs[:, 1] == b)) |
                         ((pairs[:, 0] == b) & (pairs[:, 1] == a)))
    return int(hit[0])


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
        metadata = _jsonable(dict(metadata))
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
    return {"t": "json", "v": _jsonable(value), "tuples": tuples,
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


def _units(name, norm):
    """Units of a results field (for the HDF5 attributes and the CSV header)."""
    base = name
    for prefix in ("block_",):
        if base.startswith(prefix):
            base = base[len(prefix):]
    if base.endswith("_sem"):
        base = base[:-4]
    if base in ("bins", "edges"):
        return "Å"
    if base in ("volume_cum",):
        return "Å^3"
    if base in ("rdf", "total_rdf"):
        return _NORM_UNITS[norm]
    if base in ("count", "count_uint64", "total_count", "total_count_uint64"):
        return "pairs summed over frames"
    if base == "cdf":
        return "pairs per frame"
    if base == "coordination":
        return "atoms"
    if base in ("n_frames",):
        return "frames"
    return ""


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
            ds.attrs["units"] = _units(name.split(".")[0], data.norm)
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

def _fmt_float(values):
    return [repr(v) for v in np.asarray(values, dtype=np.float64).ravel().tolist()]


def _fmt_int(values):
    return [str(v) for v in np.asarray(values).ravel().astype(np.uint64).tolist()]


class _Table:
    """Columns of strings of equal length, with a description of each."""

    def __init__(self):
        self.columns = {}
        self.about = {}

    def add(self, name, values, about):
        self.columns.setdefault(name, []).extend(values)
        self.about.setdefault(name, about)


def _table_fields(data):
    """The per-bin results fields that go into the CSV table (the rest goes in the header).
    """
    res = data.results
    names = {"bins", "edges", "count", "count_uint64", "rdf", "rdf_sem", "block_rdf",
             "block_count_uint64", "block_count", "cdf", "cdf_sem", "block_cdf",
             "coordination", "coordination_sem", "block_coordination", "total_count",
             "total_count_uint64", "total_rdf", "total_rdf_sem", "block_total_rdf"}
    return {n for n in names if n in res}


def _per_bin_columns(table, res, rows, n_rows_bins, norm, n_frames):
    """Add the r columns and the fields of one row group: `rows` maps a column name to
    (array of shape (..., nbins) flattened in row order, kind, description)."""
    edges = np.asarray(res.edges, dtype=np.float64)
    bins = np.asarray(res.bins, dtype=np.float64)
    reps = n_rows_bins // len(bins)
    table.add("r_angstrom", _fmt_float(np.tile(bins, reps)), "bin centre (Å)")
    table.add("r_lo_angstrom", _fmt_float(np.tile(edges[:-1], reps)), "lower bin edge (Å)")
    table.add("r_hi_angstrom", _fmt_float(np.tile(edges[1:], reps)), "upper bin edge (Å)")
    for name, (values, kind, about) in rows.items():
        if values is None:
            table.add(name, [""] * n_rows_bins, about)
        elif kind == "int":
            table.add(name, _fmt_int(values), about)
        else:
            table.add(name, _fmt_float(values), about)


def _block_columns(rows, res, field, column, kind, about, select=lambda a: a):
    """Columns ``<column>_block_<b>`` of the results field ``block_<field>``."""
    key = "block_" + field
    if key not in res:
        return
    blocks = res[key]
    for b in range(len(blocks) if not isinstance(blocks, list) else len(blocks[0])):
        if isinstance(blocks, list):
            values = np.concatenate([np.asarray(x[b]).ravel() for x in blocks])
        else:
            values = select(np.asarray(blocks[b]))
        rows[f"{column}_block_{b}"] = (values, kind, f"{about}, block {b}")


def _save_csv(data, path):
    res, norm, kind = data.results, data.norm, data.analysis
    n_frames = data.n_frames
    quantity = _NORM_QUANTITY[norm]
    table = _Table()
    nbins = len(res.bins)
    sem = "standard error of the block mean"
    if kind == "InterRDF":
        rows = {
            "rdf": (res.rdf, "float", quantity),
            "count": (res.count_uint64, "int", f"pairs in the bin summed over {n_frames} frames"),
        }
        if "rdf_sem" in res:
            rows["rdf_sem"] = (res.rdf_sem, "float", f"{sem} of rdf")
        _block_columns(rows, res, "count_uint64", "count", "int", "pairs")
        _block_columns(rows, res, "rdf", "rdf", "float", quantity)
        _per_bin_columns(table, res, rows, nbins, norm, n_frames)
    elif kind == "SpeciesRDF":
        n_pairs = len(res.pairs)
        species = [str(s) for s in res.species]
        a = [species[i] for i, _ in res.pairs for _ in range(nbins)]
        b = [species[j] for _, j in res.pairs for _ in range(nbins)]
        table.add("pair", [str(k) for k in range(n_pairs) for _ in range(nbins)],
                  "index of the species pair (row of results.rdf), or 'total'")
        table.add("species_a", a, "first species")
        table.add("species_b", b, "second species")
        rows = {
            "rdf": (res.rdf, "float", quantity),
            "count": (res.count_uint64, "int", f"pairs summed over {n_frames} frames"),
            "cdf": (res.cdf, "float", "cumulative pairs per frame"),
            "coordination": (res.coordination, "float",
                             "running coordination number of b around a (atoms)"),
        }
        for f in ("rdf", "cdf", "coordination"):
            if f + "_sem" in res:
                rows[f + "_sem"] = (res[f + "_sem"], "float", f"{sem} of {f}")
        _block_columns(rows, res, "count_uint64", "count", "int", "pairs")
        for f in ("rdf", "cdf", "coordination"):
            _block_columns(rows, res, f, f, "float", f)
        _per_bin_columns(table, res, rows, n_pairs * nbins, norm, n_frames)
        if "total_rdf" in res:
            table.add("pair", ["total"] * nbins, "")
            table.add("species_a", ["*"] * nbins, "")
            table.add("species_b", ["*"] * nbins, "")
            total_rows = {name: (None, "float", "") for name in rows}
            total_rows["rdf"] = (res.total_rdf, "float", "")
            total_rows["count"] = (res.total_count_uint64, "int", "")
            if "total_rdf_sem" in res:
                total_rows["rdf_sem"] = (res.total_rdf_sem, "float", "")
            if "block_total_rdf" in res:
                for bk in range(len(res.block_total_rdf)):
                    total_rows[f"rdf_block_{bk}"] = (res.block_total_rdf[bk], "float", "")
            _per_bin_columns(table, res, total_rows, nbins, norm, n_frames)
    else:  # InterRDF_s
        groups, ii, jj, ai, aj = [], [], [], [], []
        for k, count in enumerate(res.count):
            n1, n2, _ = count.shape
            i, j, _ = np.indices(count.shape)
            groups.append(np.full(count.size, k))
            ii.append(i.ravel())
            jj.append(j.ravel())
            ai.append(np.asarray(res.indices[k][0])[i.ravel()])
            aj.append(np.asarray(res.indices[k][1])[j.ravel()])
        cat = np.concatenate
        table.add("group_pair", [str(v) for v in cat(groups).tolist()],
                  "index of the pair of groups in ags")
        table.add("i", [str(v) for v in cat(ii).tolist()], "atom of the first group (position)")
        table.add("j", [str(v) for v in cat(jj).tolist()], "atom of the second group (position)")
        table.add("index_i", [str(v) for v in cat(ai).tolist()], "atom index (Atom.index)")
        table.add("index_j", [str(v) for v in cat(aj).tolist()], "atom index (Atom.index)")
        flat = lambda arrays: cat([np.asarray(x).ravel() for x in arrays])  # noqa: E731
        rows = {
            "rdf": (flat(res.rdf), "float", quantity),
            "count": (flat(res.count), "int", f"frames with the pair in the bin ({n_frames})"),
        }
        if "cdf" in res:
            rows["cdf"] = (flat(res.cdf), "float", "cumulative count per frame")
        if "rdf_sem" in res:
            rows["rdf_sem"] = (flat(res.rdf_sem), "float", f"{sem} of rdf")
        _block_columns(rows, res, "count", "count", "int", "count")
        _block_columns(rows, res, "rdf", "rdf", "float", quantity)
        n_rows = sum(np.asarray(c).size for c in res.count)
        _per_bin_columns(table, res, rows, n_rows, norm, n_frames)

    # everything that is not a per-bin column goes into the header
    skip = _table_fields(data)
    header_results = Results({k: v for k, v in res.items() if k not in skip})
    if kind == "InterRDF_s":
        header_results["shapes"] = [list(np.asarray(c).shape) for c in res.count]
    arrays, layout = _encode_results(header_results)
    header = _meta(data, layout)
    header["arrays"] = _inline(arrays)
    header["columns"] = sorted(skip)
    header["times"] = [repr(float(t)) for t in data.times.tolist()]
    units = "; ".join(f"{name}: {about}" for name, about in table.about.items() if about)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(f"# mdakit-fastrdf {json.dumps(header, ensure_ascii=False)}\n")
        fh.write(f"# columns: {units}\n")
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(table.columns)
        writer.writerows(zip(*table.columns.values()))


def _load_csv(path):
    with open(path, encoding="utf-8", newline="") as fh:
        first = fh.readline()
        tag = "# mdakit-fastrdf "
        if not first.startswith(tag):
            raise ValueError(f"{str(path)!r} was not written by mdakit_fastrdf (first line)")
        header = json.loads(first[len(tag):])
        _check_meta(header, path)
        body = "".join(line for line in fh if not line.startswith("#"))
    reader = csv.reader(_io.StringIO(body))
    names = next(reader)
    cols = {name: [] for name in names}
    for row in reader:
        for name, value in zip(names, row):
            cols[name].append(value)
    kind = header["analysis"]
    res = _decode_results(header["layout"], _uninline(header["arrays"]))
    fields = set(header["columns"])

    def floats(values):
        return np.array([float(v) for v in values], dtype=np.float64)

    def ints(values):
        return np.array([int(v) for v in values], dtype=np.uint64)

    blocks = sorted({int(n.rsplit("_", 1)[1]) for n in names if "_block_" in n})
    if kind == "InterRDF_s":
        shapes = res.pop("shapes")
        sizes = [int(np.prod(s)) for s in shapes]
        splits = np.cumsum(sizes)[:-1]

        def per_group(values, dtype=np.float64):
            arr = np.asarray(values, dtype=dtype)
            return [part.reshape(s) for part, s in zip(np.split(arr, splits), shapes)]

        nbins = shapes[0][-1]
        lo, hi = floats(cols["r_lo_angstrom"][:nbins]), floats(cols["r_hi_angstrom"][:nbins])
        res.edges = np.append(lo, hi[-1])
        res.bins = floats(cols["r_angstrom"][:nbins])
        res.count = per_group(floats(cols["count"]))
        res.rdf = per_group(floats(cols["rdf"]))
        if "cdf" in fields:
            res.cdf = per_group(floats(cols["cdf"]))
        if "rdf_sem" in fields:
            res.rdf_sem = per_group(floats(cols["rdf_sem"]))
        if "block_count" in fields:
            per_block = [per_group(floats(cols[f"count_block_{b}"])) for b in blocks]
            res.block_count = [np.stack(v) for v in zip(*per_block)]
        if "block_rdf" in fields:
            per_block = [per_group(floats(cols[f"rdf_block_{b}"])) for b in blocks]
            res.block_rdf = [np.stack(v) for v in zip(*per_block)]
    else:
        if kind == "SpeciesRDF":
            is_total = np.array([p == "total" for p in cols["pair"]])
        else:
            is_total = np.zeros(len(cols["r_angstrom"]), dtype=bool)
        keep = np.flatnonzero(~is_total)
        total = np.flatnonzero(is_total)

        def column(name, conv, rows):
            values = cols[name]
            return conv([values[i] for i in rows])

        bins = column("r_angstrom", floats, keep)
        nbins = len(bins) if kind == "InterRDF" else len(bins) // len(res.pairs)
        shape = (nbins,) if kind == "InterRDF" else (len(res.pairs), nbins)
        res.bins = bins[:nbins]
        res.edges = np.append(column("r_lo_angstrom", floats, keep)[:nbins],
                              column("r_hi_angstrom", floats, keep)[nbins - 1])
        res.count_uint64 = column("count", ints, keep).reshape(shape)
        res.count = res.count_uint64.astype(np.float64)
        res.rdf = column("rdf", floats, keep).reshape(shape)
        for f in ("cdf", "coordination", "rdf_sem", "cdf_sem", "coordination_sem"):
            if f in fields:
                res[f] = column(f, floats, keep).reshape(shape)
        if "block_count_uint64" in fields:
            res.block_count_uint64 = np.stack(
                [column(f"count_block_{b}", ints, keep).reshape(shape) for b in blocks])
        for f in ("rdf", "cdf", "coordination"):
            if "block_" + f in fields:
                res["block_" + f] = np.stack(
                    [column(f"{f}_block_{b}", floats, keep).reshape(shape) for b in blocks])
        if kind == "SpeciesRDF" and len(total):
            res.total_count_uint64 = column("count", ints, total)
            res.total_count = res.total_count_uint64.astype(np.float64)
            res.total_rdf = column("rdf", floats, total)
            if "total_rdf_sem" in fields:
                res.total_rdf_sem = column("rdf_sem", floats, total)
            if "block_total_rdf" in fields:
                res.block_total_rdf = np.stack(
                    [column(f"rdf_block_{b}", floats, total) for b in blocks])
    times = np.array([float(t) for t in header.get("times", [])], dtype=np.float64)
    return RDFData(kind, res, header["parameters"], header["parameters"].get("frames"), times)
