r"""What an analysis declares about its outputs, so that saving, loading, plotting and the
command line need no knowledge of it by name.

An analysis class sets ``outputs = OutputSpec(...)``:

* :class:`Field` entries name its results arrays, their units and descriptions, whether
  they are integers, and whether ``run(blocks=...)`` gives them a standard error;
* :class:`Table` entries say how the per-bin arrays become rows of a CSV table (one row per
  leading index and bin), with label columns that say what each row is.

It also implements, where it applies, :meth:`~PairHistogramBase._output_parameters` (the
parameters saved beside the numbers), :meth:`~PairHistogramBase._curves` (what
:func:`~mdakit_fastrdf.plot` draws) and ``_partial`` (one species pair of loaded results).
Every concrete analysis class is registered under its name, which is what a file stores;
:func:`analysis_class` returns the class of a name (``import mdakit_fastrdf``, which any
import of a module of the package runs first, imports and so registers every analysis of
the package).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

__all__ = ["Command", "Curve", "Field", "Option", "OutputSpec", "PlotAxes", "Table",
           "analysis_class", "analysis_classes", "histogram_fields", "int_at_least",
           "positive_int", "register"]

#: Units of the normalised histograms for each ``norm``.
NORM_UNITS = {"rdf": "1", "density": "Å^-3", "none": "pairs per frame"}
#: What the normalised histogram is for each ``norm``.
NORM_QUANTITY = {"rdf": "g(r) (dimensionless)", "density": "radial density (Å^-3)",
                 "none": "pairs per frame"}
#: A :attr:`Field.unit` that follows the run's ``norm`` (:data:`NORM_UNITS`).
BY_NORM = "by norm"


@dataclass(frozen=True)
class Field:
    """One results field of an analysis.

    Parameters
    ----------
    name : str
        The name in ``results``.
    unit : str
        Its unit (``''`` dimensionless; :data:`BY_NORM` for the unit of the normalisation).
    about : str
        What it is (CSV header, HDF5 attributes, docs).
    column : str, optional
        Its column in a CSV table (default: `name`).
    integer : bool
        Written as integers in CSV.
    blocks : bool
        ``run(blocks=...)`` also gives ``block_<name>`` (one row per block) and
        ``<name>_sem``.
    """

    name: str
    unit: str = ""
    about: str = ""
    column: str | None = None
    integer: bool = False
    blocks: bool = False

    def unit_for(self, norm) -> str:
        return NORM_UNITS[norm] if self.unit == BY_NORM else self.unit

    def about_for(self, norm) -> str:
        return self.about.replace("{quantity}", NORM_QUANTITY[norm])


@dataclass(frozen=True)
class Table:
    """Rows of a CSV table: the per-bin arrays `fields` (shape ``(..., nbins)``, or lists
    of such arrays), one row per leading index and bin.

    ``columns`` maps a results field to its CSV column when the column's name differs from
    the field's :attr:`Field.column` (e.g. the total RDF written into the ``rdf`` column of
    its own rows). ``labels(results)`` gives the label columns: ``{column: (values, about)}``
    with one string per leading index (row block of ``nbins`` rows).

    ``axis`` names the results field the rows run over: ``"bins"`` (default: the columns
    ``r_angstrom``, ``r_lo_angstrom``, ``r_hi_angstrom``) or another 1-D field (``"q"``: a
    column of its own, named and described by its :class:`Field`), whose length then replaces
    ``nbins``.

    ``wide(results)``, when given, writes the table wide instead: one column per leading
    index, ``<column>_<suffix>`` with the suffixes it returns (e.g. ``partials_O_H``), so
    that the table shares its rows, one per x value, with the unlabelled tables over the
    same axis.
    """

    fields: tuple
    columns: dict = field(default_factory=dict)
    labels: Callable | None = None
    axis: str = "bins"
    wide: Callable | None = None


@dataclass(frozen=True)
class OutputSpec:
    """The outputs an analysis declares (see the module docstring).

    ``csv_files`` maps a table axis to the file of its rows when an analysis has tables over
    more than one axis: ``{"bins": "gr"}`` writes the rows over r of ``sq.csv`` to
    ``sq_gr.csv``; tables over the other axes stay in the file named."""

    fields: tuple = ()
    tables: tuple = ()
    csv_files: dict = field(default_factory=dict)

    def field(self, name) -> Field | None:
        """The :class:`Field` of results field `name` (``block_*`` and ``*_sem`` resolve to
        their field), or None."""
        base = name.removeprefix("block_").removesuffix("_sem")
        for f in self.fields:
            if f.name == base:
                return f
        return None

    def column(self, name, table=None) -> str:
        """The CSV column of results field `name` (in `table`)."""
        if table is not None and name in table.columns:
            return table.columns[name]
        f = self.field(name)
        return (f.column or f.name) if f is not None else name

    @property
    def block_fields(self) -> tuple:
        """Fields for which blocks give a standard error."""
        return tuple(f.name for f in self.fields if f.blocks)

    def extend(self, fields=(), tables=(), csv_files=None) -> OutputSpec:
        """A copy with more fields and tables (for a subclass adding results), and its
        own :attr:`csv_files` when given."""
        return replace(self, fields=tuple(self.fields) + tuple(fields),
                       tables=tuple(self.tables) + tuple(tables),
                       csv_files=dict(self.csv_files if csv_files is None else csv_files))


def histogram_fields(count_about="pairs in the bin summed over frames"):
    """The fields every pair histogram has: bin centres and edges, the counts (float64 as
    MDAnalysis gives them, and exact in ``count_uint64``), the normalised ``rdf`` (with a
    standard error from blocks) and the summed box volume."""
    return (
        Field("bins", "Å", "bin centre"),
        Field("edges", "Å", "bin edges"),
        Field("count", "pairs summed over frames", count_about),
        Field("count_uint64", "pairs summed over frames", count_about + " (exact)",
              column="count", integer=True),
        Field("rdf", BY_NORM, "{quantity}", blocks=True),
        Field("volume_cum", "Å^3", "sum of the box volumes of the frames"),
    )


def shell_fields(around="g2 around g1"):
    """The running sums of a pair histogram: the cumulative pairs per frame and the running
    coordination number (of `around`), each with a standard error from blocks."""
    return (
        Field("cdf", "pairs per frame", "cumulative pairs per frame", blocks=True),
        Field("coordination", "atoms", f"running coordination number of {around}",
              blocks=True),
    )


@dataclass
class Curve:
    """One line of a plot: ``y`` over the x values of the plot's axes (:class:`PlotAxes`;
    the bin centres by default) or over its own ``x``, its standard error, and optionally
    the running coordination number drawn on a second axis."""

    label: str | None
    y: object
    sem: object = None
    coordination: object = None
    coordination_sem: object = None
    color: str | None = None
    x: object = None


@dataclass
class PlotAxes:
    r"""The axes of an analysis' plot, for results that are not functions of r.

    An analysis class whose curves are not drawn over the bin centres (a structure factor
    over q, an intensity on a log scale) gives a classmethod ``_plot_axes(results,
    parameters)`` returning one of these; without it, :func:`~mdakit_fastrdf.plot` draws
    over the bin centres with the labels of the run's ``norm``.

    Parameters
    ----------
    x : array_like
        The x values of the curves (each :class:`Curve` may override them).
    xlabel, ylabel : str
        Axis labels.
    xlim : tuple of float, optional
        x range (default: the range of `x`).
    yscale : str
        ``'linear'`` or ``'log'``.
    reference : float, optional
        A horizontal reference line (g(r) = 1, S(q) = 1), or None.
    ylim_from : tuple of float, optional
        ``(x_lo, x_hi)`` (either None: open): the y limits are chosen from the curves
        within this x range (e.g. S(q) above :math:`2\pi/r_\mathrm{max}`); values outside
        it that lie far beyond are drawn off scale, and a note on the plot says so.
    title : str, optional
        The plot's title (e.g. LateralRDF's plane), or None.
    """

    x: object
    xlabel: str
    ylabel: str
    xlim: tuple | None = None
    yscale: str = "linear"
    reference: float | None = None
    ylim_from: tuple | None = None
    title: str | None = None


@dataclass(frozen=True)
class Option:
    """One option of an analysis' command: ``flags`` as :mod:`argparse` takes them
    (``("--q-max",)``), the constructor keyword it sets (``dest``) and the remaining
    :meth:`argparse.ArgumentParser.add_argument` keywords (``type``, ``default``, ``help``,
    ``choices``, ``nargs``, ``metavar``, ``action``). An option left at None is not passed,
    so the class's own default applies; ``convert`` turns the parsed value into the
    constructor's argument (e.g. ``--q QMIN QMAX N`` into an array of q values).

    ``group`` names the argparse group that lists it in ``--help`` (default: the class's
    options; ``"frames"``, ``"computation"`` and ``"output"`` are the common groups); options
    with the same ``exclusive`` key are mutually exclusive. ``keyword=False``: the option is
    read by the command's hooks only and not passed to the constructor (nor named in its
    error messages)."""

    flags: tuple
    dest: str
    kwargs: dict = field(default_factory=dict)
    convert: Callable | None = None
    group: str | None = None
    exclusive: str | None = None
    keyword: bool = True


@dataclass(frozen=True)
class Command:
    """The command-line subcommand of an analysis (``mdakit-fastrdf NAME ...``).

    The analysis is built as ``cls(atomgroup, **options)`` from the atoms of ``--select``
    and runs with the common options (frames, device, precision, backend, blocks, output,
    plot); :mod:`mdakit_fastrdf.cli.commands` does the rest from this declaration. The
    optional hooks below change one step each; each receives the parsed arguments
    (``args``, an :class:`argparse.Namespace`), which a hook may annotate for a later one.

    Parameters
    ----------
    name : str
        The subcommand; the default output file is ``NAME.csv``.
    help : str
        One line for ``--help``. For a variant (`switch`): what the switch gives, named in
        the error when the variant's options come without it.
    select : str
        Default selection.
    demo : tuple of str
        MDAnalysisTests data file names (``("TPR", "XTC")``) used without a topology.
    options : tuple of Option
        The analysis' own options.
    summary : callable, optional
        ``summary(analysis) -> list of (label, text)``: lines printed after the run.
    guess_elements : bool
        The analysis needs elements: the command offers ``--guess-elements`` (guess missing
        elements from the atom names and types with MDAnalysis's guesser) and uses it for
        the demo data.
    main : bool
        The program's main command: ``mdakit-fastrdf [topology [trajectory]] [options]``,
        without a name (one class of the package declares it).
    description : str, optional
        The ``--help`` description (default: from `help` and `demo`).
    demo_about : str, optional
        What the demo data is, for the line that says it is used.
    common_help : dict
        ``{dest: help}``: this command's help of common options (``device``, ``output``, ...).
    groups : callable, optional
        ``groups(select, args) -> tuple of AtomGroup``: the atom groups the class is built
        from, chosen with ``select(selection, updating=False)`` (the command line's, which
        reports an empty or invalid selection); default ``(select(args.select),)``, with
        the ``--select`` option. With this hook the command declares its selection options
        itself (``keyword=False``).
    validate : callable, optional
        ``validate(args) -> str or None``: an error in the arguments, reported as a usage
        error (exit status 2) before anything is loaded.
    prepare : callable, optional
        ``prepare(args, groups)``: checks and defaults once the groups are known, before
        the analysis is built; raise ``ValueError`` to stop with a message.
    build : callable, optional
        ``build(cls, groups, kwargs, args) -> analysis``: build the analysis from the
        keyword options `kwargs` (default ``cls(*groups, **kwargs)``).
    metadata : callable, optional
        ``metadata(args) -> dict``: what the saved file records of the command line
        (default ``{"select": args.select}``); ``command`` and ``wall_s`` follow.
    plot : callable, optional
        ``plot(analysis, ax, args)``: draw the ``--plot`` figure on `ax` (default: the
        analysis' plot titled with the class and selection).
    report : callable, optional
        ``report(analysis, args, lines) -> list of (label, text)``: the printed summary
        from the standard `lines` (``{label: text}``: ``System``, ``Run time``, ``Results``
        and, with ``--plot``, ``Plot``); ``args.wall_s`` holds the run's wall time.
        Default: the standard lines with `summary`'s after ``Run time``.
    summary_format : str
        The format of a line of the printed summary, from ``label``, ``text`` and
        ``width`` (the longest label's length).
    switch : str, optional
        This declaration is a *variant* of the command of the same `name` declared by
        another class: its options join that command, and the `dest` of one of them (the
        switch) chooses this class when given. A variant's `prepare` runs after the main
        declaration's and its `build` builds it; the other hooks are the main declaration's.
    """

    name: str
    help: str
    select: str = "all"
    demo: tuple = ("TPR", "XTC")
    options: tuple = ()
    summary: Callable | None = None
    guess_elements: bool = False
    main: bool = False
    description: str | None = None
    demo_about: str | None = None
    common_help: dict = field(default_factory=dict)
    groups: Callable | None = None
    validate: Callable | None = None
    prepare: Callable | None = None
    build: Callable | None = None
    metadata: Callable | None = None
    plot: Callable | None = None
    report: Callable | None = None
    summary_format: str = "{label:<{width}} : {text}"
    switch: str | None = None


def int_at_least(text: str, least: int, expected: str) -> int:
    """`text` as an integer of at least `least` (``least`` >= 1), else argparse's error
    "expected <expected>, got <text>" (an :class:`Option`'s ``type``)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An :class:`Option`'s ``type`` for a count of at least 1."""
    return int_at_least(text, 1, "a positive integer")


_REGISTRY: dict = {}


def register(cls):
    """Record `cls` under its name (done for every subclass of the pair-histogram base)."""
    _REGISTRY[cls.__name__] = cls
    return cls


def analysis_class(name):
    """The analysis class saved as `name`; ValueError for an unknown name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown analysis {name!r}; this version of mdakit_fastrdf knows "
            f"{sorted(_REGISTRY)}"
        ) from None


def analysis_classes() -> dict:
    """Every registered analysis class by name."""
    return dict(_REGISTRY)


#: The functions of the outputs layer behind the ``save()`` and ``plot()`` methods of the
#: analyses and of :class:`~mdakit_fastrdf.RDFData`, by name: ``{"save": ..., "plot": ...}``.
#: :mod:`mdakit_fastrdf.outputs.io` and :mod:`~mdakit_fastrdf.outputs.plotting` provide them
#: when imported (``import mdakit_fastrdf`` imports both); the methods look them up when
#: called, so that no module imports the layer above its own.
_OUTPUT_FUNCTIONS: dict = {}


def provides_output(func):
    """Record `func` (``save`` or ``plot`` of the outputs layer) under its name."""
    _OUTPUT_FUNCTIONS[func.__name__] = func
    return func


def output_function(name):
    """The outputs layer's function `name` (``'save'`` or ``'plot'``)."""
    try:
        return _OUTPUT_FUNCTIONS[name]
    except KeyError:
        raise RuntimeError(f"{name}() is provided by mdakit_fastrdf.outputs: "
                           "import mdakit_fastrdf") from None

