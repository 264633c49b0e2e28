r"""The pair-histogram base: what every analysis of the package shares.

:class:`PairHistogramBase` owns the frame loop, the species layout (atom index, species
offsets, species pairs, exclusion labels), the preparation of a frame's coordinates, the
engine call, the aggregation of the counts over every parallel backend, block averaging and
the declared result layout. An analysis supplies its declarations (``outputs``,
``command``, ``coordinates``, ``geometry``, ``compute_keywords``, ``part_results``) and at
most these named hooks:

* :meth:`~PairHistogramBase._layout`: its species layout (a :class:`PairLayout`);
* :meth:`~PairHistogramBase._normalise`: its results, from the integer counts of a run or
  of one block;
* :meth:`~PairHistogramBase._frame_rows` (optional): per-frame float results, one row per
  frame, gathered from every parallel backend in frame order (:func:`frame_sum`);
* :meth:`~PairHistogramBase._accumulate` (optional): a frame's work on its prepared rows
  (default: the histogram of every species pair);
* :meth:`~PairHistogramBase._output_parameters` and :meth:`~PairHistogramBase._curves`:
  what is saved beside the numbers, and what is plotted;

and, for a correlation of frames computed in parts, ``_halo``, ``_start_part`` and
``_finish_part`` (:mod:`~mdakit_fastrdf.analysis.parts`). The base's state is read through
``layout``, ``bin_edges``, ``rmax``, ``engine`` and ``worker_threads``.

See "Adding an analysis" in the design page of the docs for a worked example.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from MDAnalysis.analysis.base import AnalysisBase

from ..backends import ParallelAnalysisMixin, _private_progress_lock
from ..backends.frames import FedTimestep, PartCancelled
from ..engine import (
    NO_BOX,
    Box,
    Engine,
    available_cpus,
    gather_positions,
    prepare_box,
)

# the shells' maths and the blocks' and parts' merging, one file each; their names are this
# module's too (the documented paths, mdakit_fastrdf.analysis.base.*)
from .blocks import (  # noqa: F401
    MIN_BLOCKS,
    BlockAveraging,
    block_plan,
    block_sem,
    concatenate_parts,
    few_blocks_message,
    frame_sum,
    order_frames,
    parts_aggregator,
    same_in_every_part,
    sum_parts,
)
from .checks import (
    _user_stacklevel,
    check_keywords,
    check_nbins,
    check_norm,
    check_range,
)
from .compute import COMPUTE_KEYWORDS, ComputeOptions
from .coords import COORDINATE_MODES, prepare_coordinates
from .fed import FedFrames
from .declarations import Curve, OutputSpec, output_function, register
from .histograms import _bin_edges, histogram_edges, normalise_counts, shell_volumes  # noqa: F401
from .layout import PairLayout
from .memory import available_memory_bytes, check_histogram_memory  # noqa: F401
from .parameters import run_parameters
from .parts import RunParts
from .results import _Results

__all__ = ["PairHistogramBase", "PairLayout", "block_plan", "block_sem", "frame_sum",
           "histogram_edges", "normalise_counts", "shell_volumes"]


class PairHistogramBase(RunParts, ParallelAnalysisMixin, BlockAveraging, FedFrames,
                        AnalysisBase):
    r"""Base of the package's analyses: per-species-pair distance histograms of each frame,
    accumulated as exact integers and normalised once at the end.

    A subclass calls :meth:`_init_histograms` from its ``__init__`` and implements
    :meth:`_layout` and :meth:`_normalise`; it declares :attr:`outputs`, and overrides
    :meth:`_output_parameters` and :meth:`_curves` for saving and plotting. Everything else
    (the frame loop, coordinates, the engine, the parallel backends of :meth:`run`, blocks,
    :meth:`save`, :meth:`plot`) is shared.
    """

    #: How a frame's positions are prepared (:mod:`~mdakit_fastrdf.analysis.coords`).
    coordinates = "wrapped"
    #: Results fields that receive the counts of a frame.
    _count_fields = ("count_uint64",)
    #: The declared outputs (:mod:`~mdakit_fastrdf.analysis.declarations`).
    outputs = OutputSpec()
    #: float64 arrays of the histograms' size the results hold (for the memory check).
    _result_arrays = 2
    #: The compute keywords the analysis takes (:mod:`~mdakit_fastrdf.analysis.compute`).
    compute_keywords = COMPUTE_KEYWORDS
    #: The geometry of the distances: None (3D distances, spherical shells) or a
    #: :class:`~mdakit_fastrdf.analysis.plane.Plane` (distances in a plane, rings), which
    #: measures each frame's box (``results.frame_plane``), turns the frame's rows into what
    #: the kernels histogram, and normalises (:meth:`_normalised`).
    geometry = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.coordinates not in COORDINATE_MODES:
            raise TypeError(f"{cls.__name__}.coordinates must be one of {COORDINATE_MODES}")
        register(cls)

    # -- construction -----------------------------------------------------------------
    def _init_histograms(self, universe, nbins, range, norm, *, kwargs=None,
                         nbins_limit=check_nbins.__defaults__[0]):
        """Check and store what every analysis takes. Call it first in ``__init__`` (after
        the checks MDAnalysis makes first, e.g. of the groups) with the keywords the
        subclass did not name: the compute options (:attr:`compute_keywords`, or
        ``compute=``) become :attr:`compute`, and any other unknown keyword is a TypeError;
        ``norm`` is checked before ``nbins`` and ``range`` as MDAnalysis does."""
        kwargs = dict(kwargs or {})
        given = {k: kwargs.pop(k) for k in (*self.compute_keywords, "compute") if k in kwargs}
        check_keywords(type(self).__name__, kwargs)
        AnalysisBase.__init__(self, universe.trajectory, **kwargs)
        self._universe = universe
        self.norm = check_norm(norm)
        self.rdf_settings = {"bins": check_nbins(nbins, limit=nbins_limit),
                             "range": check_range(range)}
        #: how the analysis computes (:class:`~mdakit_fastrdf.analysis.compute.ComputeOptions`)
        self.compute = ComputeOptions.take(given, type(self).__name__, self.compute_keywords)
        self.device, self.precision = self.compute.device, self.compute.precision
        self.n_threads, self.method = self.compute.n_threads, self.compute.method
        self._worker_threads = self.n_threads
        self._engine = None
        self._block_plan = None
        self._local_blocks = None
        self._block_arrays = None
        self._run_options = {}

    # -- what a subclass supplies -----------------------------------------------------
    def _layout(self) -> PairLayout:
        """The species layout (called once per worker, in ``_prepare``)."""
        raise NotImplementedError

    def _normalise(self, res):
        """Fill `res` (the results of the run, or of one block) from its counts: ``res``
        holds ``edges``, ``bins``, the count fields and ``volume_cum`` (norm 'rdf');
        ``self.n_frames`` is the number of frames it covers."""
        raise NotImplementedError

    def _frame_rows(self) -> dict:
        """Per-frame float results: ``{name: shape}`` of the row that each frame stores in
        ``results.<name>`` (with :meth:`_store_frame`), called in ``_prepare`` after
        :meth:`_layout`. The base allocates one float64 row per frame of the worker, joins
        the workers' rows and puts them in frame order (``results.frame_index``: the index
        of each row's frame in the run) before :meth:`_normalise`, which sees the rows of
        the whole run, or of one block, in frame order (sum them with :func:`frame_sum`).
        Default: none."""
        return {} if self.geometry is None else {"frame_plane": (self.geometry.ROW,)}

    def _store_frame(self, name, value):
        """Store the current frame's row of per-frame result `name` (see
        :meth:`_frame_rows`)."""
        self.results[name][self._frame_index] = value

    def _output_parameters(self) -> dict:
        """Parameters of this analysis saved beside the numbers (beyond the common ones)."""
        return {}

    @classmethod
    def _curves(cls, results, parameters, **options) -> list:
        """What :func:`~mdakit_fastrdf.plot` draws: a list of
        :class:`~mdakit_fastrdf.analysis.declarations.Curve`."""
        raise TypeError(f"{cls.__name__} results cannot be plotted")

    # -- derived from the declarations ------------------------------------------------
    @property
    def _block_outputs(self):
        return self.outputs.block_fields

    def _normalised(self, count, n_pairs=1):
        """`count` normalised by this run's ``norm``: by spherical shells
        (:func:`normalise_counts`), or as the :attr:`geometry` says."""
        if self.geometry is not None:
            return self.geometry.normalised(count, n_pairs, self.norm, self.results.edges,
                                            self.results.frame_plane, self.n_frames)
        return normalise_counts(count, self.norm, self.n_frames, self.results.edges,
                                self.results.get("volume_cum"), n_pairs)

    # -- what the base offers a subclass (read-only, set by _prepare in each worker) -------
    @property
    def layout(self) -> PairLayout:
        """The species layout of this worker's run (:meth:`_layout`, taken in ``_prepare``;
        again each frame by :meth:`_relayout` for groups that change)."""
        return self._layout_cache

    @property
    def bin_edges(self) -> np.ndarray:
        """The bin edges of the histograms, float64, contiguous (InterRDF's ``edges`` is
        MDAnalysis's deprecated name of ``results.edges``)."""
        return self._edges

    @property
    def rmax(self) -> float:
        """The upper end of ``range``, Å."""
        return self.rdf_settings["range"][1]

    @property
    def engine(self) -> Engine:
        """This worker's :class:`~mdakit_fastrdf.engine.Engine` (made in ``_prepare``)."""
        return self._engine

    @property
    def worker_threads(self) -> int | None:
        """CPU threads of this worker (``n_threads``, divided among a parallel run's
        workers), for a subclass's own compiled work."""
        return self._worker_threads

    def _relayout(self) -> PairLayout:
        """Take :meth:`_layout` again for this frame (UpdatingAtomGroups) and grow the
        positions' buffer to fit it."""
        layout = self._layout_cache = self._layout()
        layout.ix = np.ascontiguousarray(layout.ix, dtype=np.int64)
        if len(self._buf) < len(layout.ix):
            self._buf = np.empty((max(len(layout.ix), 2 * len(self._buf)), 3), np.float32)
        return layout

    def _histogram(self, coords, box, out=None):
        """Add the frame's pair distances of every species pair of :attr:`layout` to `out`
        (default: the run's counts, or the current block's), `coords` and `box` ready for
        the kernels."""
        layout = self._layout_cache
        if out is None:
            out = self._frame_out(self.results.count_uint64)
        self._engine.accumulate(coords, layout.offsets, layout.pairs, self._edges, box,
                                layout.labels, out)

    # -- engine -----------------------------------------------------------------------
    def _make_engine(self):
        """The engine of this worker (created in the worker, in ``_prepare``)."""
        return Engine(self.device, self.precision, self._worker_threads, method=self.method)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_engine"] = None
        # views into the block counts: pickled, each would be a full copy of its block; a
        # worker makes them again
        state["_block_arrays"] = None
        return state

    def _n_pair_histograms(self):
        """How many histograms of ``nbins`` a worker holds (for the memory check)."""
        return len(self._layout_cache.pairs)

    def _allocate_counts(self, nbins):
        """``results`` count fields of a worker, zeroed (species pairs x bins, uint64)."""
        self.results.count_uint64 = np.zeros((len(self._layout_cache.pairs), nbins),
                                             dtype=np.uint64)

    def _prepare(self):
        nbins = self.rdf_settings["bins"]
        self._layout_cache = layout = self._layout()
        layout.ix = np.ascontiguousarray(layout.ix, dtype=np.int64)
        self._check_histogram_memory(self._n_pair_histograms(), nbins,
                                     result_arrays=self._result_arrays)
        edges, bins = histogram_edges(nbins, self.rdf_settings["range"])
        self.results.edges = edges
        self.results.bins = bins
        self._allocate_counts(nbins)
        rows = self._frame_rows()
        local = getattr(self, "_local_frames", None)
        if local is None:  # _prepare outside _compute: the frames of the sliced trajectory
            local = np.arange(len(self._sliced_trajectory), dtype=np.int64)
        if rows:
            self.results.frame_index = np.array(local, dtype=np.int64)
            for name, shape in rows.items():
                self.results[name] = np.zeros((len(local),) + tuple(shape), dtype=np.float64)
        if self.norm == "rdf":
            self.results.volume_cum = 0
        self._edges = np.ascontiguousarray(edges, dtype=np.float64)
        self._rmax = self.rdf_settings["range"][1]
        self._buf = np.empty((len(layout.ix), 3), dtype=np.float32)
        self._engine = self._make_engine()
        self._start_part(len(local))

    # -- frames prepared by readers (backends.feed) ---------------------------------
    def _can_feed(self) -> bool:
        """Whether reader processes may prepare this analysis's frames: true when a frame
        needs only its rows (:meth:`_take_positions`, a fixed number of them) and the
        Timestep's frame, time, box and volume, i.e. when :meth:`_single_frame` is the
        base's. A subclass that overrides :meth:`_single_frame` says so itself."""
        return type(self)._single_frame is PairHistogramBase._single_frame

    # -- the frame loop ---------------------------------------------------------------
    def _single_frame(self):
        box = self._frame_box()
        coords = self._frame_positions()
        self._accumulate(coords, box)
        if self.norm == "rdf":
            self.results.volume_cum += self._ts.volume

    def _prepare_rows(self, coords, box):
        """Prepare the frame's rows for the kernels as :attr:`coordinates` says (in place)
        and return the box the kernels use (a reader does this for a fed worker when
        :meth:`_reader_prepares`)."""
        (_, _, n1, n2), = self._layout_cache.segments
        return prepare_coordinates(self.coordinates, box, coords, (n1, n2), self._rmax)

    def _reader_prepares(self) -> bool:
        """Whether readers may also prepare the rows (wrap them into the box): when
        :meth:`_accumulate` is the base's, whose first step that is, and the distances are
        three-dimensional."""
        return type(self)._accumulate is PairHistogramBase._accumulate and self.geometry is None

    def _accumulate(self, coords, box):
        """One engine call for every species pair of the frame."""
        kind = self._ts.box_kind if isinstance(self._ts, FedTimestep) else None
        if kind is None:
            box = self._prepare_rows(coords, box)
        elif kind != box.kind:  # prepared by the reader, which chose this arithmetic
            box = Box(kind, box.vectors32)
        if self.geometry is not None:
            box = self.geometry.to_kernels(coords, box, self._ts.frame)
        self._histogram(coords, box)

    def _get_aggregator(self):
        return parts_aggregator(self._count_fields, self._frame_rows(),
                                {**self._block_lookup(), **self._part_lookup()})

    def _order_frames(self):
        """Put the per-frame rows of the merged results in frame order."""
        order_frames(self.results, self._frame_rows())

    def _conclude(self):
        self._order_frames()
        if self.norm == "rdf":
            self.volume_cum = self.results.volume_cum
        self._normalise(self.results)

    # -- run --------------------------------------------------------------------------
    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, *,
            n_workers=None, n_parts=None, backend=None, unsupported_backend=False,
            progressbar_kwargs=None, blocks=None):
        """Perform the calculation (see :meth:`MDAnalysis.analysis.base.AnalysisBase.run`).

        The parallel backends, the sharing of cores among workers and the progress bar are
        those of :meth:`mdakit_fastrdf.backends.ParallelAnalysisMixin.run`.

        Parameters
        ----------
        blocks : int, optional
            Keyword only. Also histogram the frames in `blocks` consecutive blocks (at least
            2, at most the number of frames; split as :func:`numpy.array_split` splits the
            frames) and estimate the standard error of the results from the spread of the
            blocks (see :ref:`block-averaging`). Adds ``results.block_*`` and
            ``results.*_sem``. The block counts are integers summed over frames, so every
            parallel backend gives the same blocks.
        """
        self._block_plan = None
        if frames is None:  # the length of MDAnalysis's sliced trajectory, as it takes it
            n_total = len(range(*self._trajectory.check_slice_indices(start, stop, step)))
        else:
            n_total = len(self._setup_computation_groups(
                1, start=start, stop=stop, step=step, frames=frames)[0])
        if n_total == 0:
            raise ValueError(
                f"start={start!r}, stop={stop!r}, step={step!r}, frames={frames!r} select no "
                f"frame of the {len(self._trajectory)} in the trajectory: an RDF needs at "
                "least one frame; choose start/stop/step or frames that include one")
        if blocks is not None:
            self._block_plan = block_plan(blocks, n_total)
            message = few_blocks_message(blocks)
            if message is not None:
                warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())
        self._run_pid = os.getpid()
        self._run_options = {
            "start": start, "stop": stop, "step": step,
            "backend": ("serial" if backend is None else backend if isinstance(backend, str)
                        else type(backend).__name__),
            "n_workers": n_workers, "n_parts": n_parts, "blocks": blocks,
        }
        if backend in (None, "serial") and n_parts is not None and n_parts > 1:
            # MDAnalysis's serial backend runs every part on the same object and then
            # aggregates that one object n_parts times, which loses frames (its own InterRDF
            # gives wrong counts with n_parts > 1). In one process one part gives the same
            # integer counts as any split, so run one part.
            n_parts = 1
        # A new run starts from empty results: the results of an earlier run would travel
        # to the workers with the object and come back as keys without an aggregator
        # (MDAnalysis's own InterRDF fails a second parallel run that way).
        self.results = _Results()
        super().run(
            start=start, stop=stop, step=step, frames=frames, verbose=verbose,
            n_workers=n_workers, n_parts=n_parts, backend=backend,
            unsupported_backend=unsupported_backend, progressbar_kwargs=progressbar_kwargs,
        )
        if self._block_plan is not None:
            self._conclude_blocks()
        return self

    def _compute(self, indexed_frames, verbose=None, *, progressbar_kwargs=None):
        if os.getpid() != getattr(self, "_run_pid", os.getpid()):
            _private_progress_lock()  # a worker process: see the function
        # With blocks: the block of each frame of this worker, from the frame's index in the
        # whole run (the first column of indexed_frames), whatever the split.
        plan = getattr(self, "_block_plan", None)
        self._local_frames = np.asarray(indexed_frames, dtype=np.int64).reshape(-1, 2)[:, 0]
        self._block_arrays = None
        self._local_blocks = (None if plan is None
                              else plan[np.asarray(indexed_frames, dtype=np.int64)[:, 0]])
        # A GPU engine queues frames asynchronously; collect its counts before the worker's
        # results are handed back.
        try:
            super()._compute(indexed_frames, verbose=verbose,
                             progressbar_kwargs=progressbar_kwargs)
        except PartCancelled:
            self._synchronize()  # the frames queued on a GPU, before their arrays go
            raise
        self._synchronize()
        if plan is not None:
            self._finish_blocks()
        index = self._local_frames
        n_own = (getattr(self, "_own_frames", None) or {}).get(int(index[0]), len(index)) \
            if len(index) else 0
        self._finish_part(index, n_own)
        # a halo's frames are the next part's: this part reports its own frames only
        self.frames, self.times = self.frames[:n_own], self.times[:n_own]
        return self

    def _synchronize(self):
        if getattr(self, "_engine", None) is not None:
            self._engine.synchronize()

    # -- outputs ----------------------------------------------------------------------
    def save(self, filename, format=None, *, metadata=None):
        """Save the results and the parameters of the run (see :func:`mdakit_fastrdf.save`).

        Parameters
        ----------
        filename : str or pathlib.Path
            Output file; the format follows the suffix: ``.npz``, ``.csv``, ``.h5`` or
            ``.hdf5``.
        format : {'npz', 'csv', 'hdf5'}, optional
            Overrides the suffix.
        metadata : dict, optional
            Extra JSON-serialisable entries stored with the parameters (e.g. the selection
            strings of the groups).

        Returns
        -------
        pathlib.Path
            The file written.
        """
        return output_function("save")(self, filename, format=format, metadata=metadata)

    def plot(self, ax=None, **kwargs):
        """Plot the results on a matplotlib Axes (see :func:`mdakit_fastrdf.plot`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        return output_function("plot")(self, ax=ax, **kwargs)

    def parameters(self):
        """The parameters of the last run, as the JSON-serialisable dict that :meth:`save`
        stores beside the numbers (see :func:`mdakit_fastrdf.outputs.io.run_parameters`)."""
        return run_parameters(self)

    # -- per-frame helpers ------------------------------------------------------------
    def _check_histogram_memory(self, n_pairs, nbins, result_arrays):
        """MemoryError before anything is allocated when this worker's histograms do not fit
        (:func:`~mdakit_fastrdf.analysis.memory.check_histogram_memory`; the CPU kernel's
        per-thread histograms counted when the device is not a GPU)."""
        threads = 0
        if not str(self.device).startswith("cuda"):
            threads = self._worker_threads or available_cpus()
        check_histogram_memory(n_pairs, nbins, result_arrays, threads)

    def _needs_box_volume(self) -> bool:
        """Whether a frame without a box is an error (the normalisation needs its volume):
        ``norm='rdf'``. An analysis whose normalisation needs the box only in some of its
        modes says so here, and checks what it needs itself."""
        return self.norm == "rdf"

    def _frame_box(self) -> Box:
        """The checked box of the current frame; a frame without one is an error when the
        normalisation needs its volume (:meth:`_needs_box_volume`).

        Called once at the start of each frame; with blocks it also counts the frame and its
        box volume in the frame's block."""
        ts = self._ts
        box = prepare_box(ts.dimensions)
        if self._local_blocks is not None:  # count the frame and its volume in its block
            self._ensure_block_arrays()
            b = self._local_blocks[self._frame_index]
            self.results.block_n_frames[b] += 1
            self.results.block_volume_cum[b] += ts.volume if box.kind != NO_BOX else 0.0
        if box.kind == NO_BOX and self._needs_box_volume():
            raise ValueError(
                "norm='rdf' needs the box volume, but this trajectory has no box "
                f"(frame {ts.frame}: dimensions={ts.dimensions}). Use norm='density' or "
                "norm='none', or set the box (e.g. with a transformation)."
            )
        if self.geometry is not None:
            self._store_frame("frame_plane", self.geometry.measure(box, ts.frame, self.rmax))
        return box

    def _take_positions(self, ix, out):
        """Copy the positions of atoms ``ix`` of this frame into ``out`` (float32), checked:
        one compiled pass gathers and checks that every value is finite."""
        ts = self._ts
        positions = np.ascontiguousarray(ts.positions, dtype=np.float32)
        if not gather_positions(positions, ix, out):
            raise ValueError(
                f"coordinates of frame {ts.frame} hold NaN or infinite values; "
                "the RDF of such a frame is undefined"
            )
        return out



__all__ += ["Curve"]
