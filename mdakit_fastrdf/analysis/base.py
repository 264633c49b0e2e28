"""What every RDF analysis of this package shares.

:class:`RDFBase` holds the machinery common to :class:`~mdakit_fastrdf.InterRDF`,
:class:`~mdakit_fastrdf.InterRDF_s` and :class:`~mdakit_fastrdf.SpeciesRDF`: argument checks,
the parallel backends (cores shared among workers, compiled state created lazily in each
worker and never pickled, a GPU engine synchronised before a worker hands back its counts),
the box of a frame, the reproduction of MDAnalysis's coordinate handling and the shell volumes
of the normalisations.
"""

from __future__ import annotations

import numbers
import os
import warnings

import numpy as np
from MDAnalysis.analysis.base import AnalysisBase
from MDAnalysis.analysis.results import Results, ResultsGroup

from ..backends import ParallelAnalysisMixin, _private_progress_lock

from ..engine import (
    MAX_BINS,
    NO_BOX,
    ORTHO,
    ORTHO_SCALED,
    Box,
    Engine,
    available_cpus,
    prepare_box,
    validate_device,
    validate_method,
    validate_n_threads,
    validate_precision,
    wrap_positions,
)

_NORMS = ("rdf", "density", "none")


def check_atomgroup(ag, name):
    """TypeError/ValueError unless ``ag`` is a static, non-empty AtomGroup."""
    from MDAnalysis.core.groups import AtomGroup, UpdatingAtomGroup

    if not isinstance(ag, AtomGroup):
        raise TypeError(f"{name} must be an MDAnalysis AtomGroup, got {type(ag).__name__}")
    if isinstance(ag, UpdatingAtomGroup):
        raise ValueError(
            f"{name} is an UpdatingAtomGroup; its size changes between frames, which the "
            f"normalisation of InterRDF cannot describe. Pass a static AtomGroup "
            f"(e.g. {name}.atoms) or select per frame yourself."
        )
    if len(ag) == 0:
        raise ValueError(f"{name} is an empty AtomGroup: select at least one atom")


def check_nbins(nbins, limit=MAX_BINS):
    """``nbins`` as an int: an integer from 1 to `limit` (None: no upper limit)."""
    if isinstance(nbins, bool) or not isinstance(nbins, numbers.Integral):
        raise TypeError(f"nbins must be an integer, got {nbins!r}")
    if nbins < 1:
        raise ValueError(f"nbins must be >= 1, got {nbins}")
    if limit is not None and nbins > limit:
        raise ValueError(
            f"nbins={nbins} is more than the {limit:,} bins the kernels take "
            f"(the counts alone would need {8 * nbins / 2**30:.2f} GiB per histogram)"
        )
    return int(nbins)


def available_memory_bytes():
    """Memory the system can give this process now (``MemAvailable`` of /proc/meminfo), or
    None where that is not known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return None


def check_range(rng):
    try:
        rmin, rmax = (float(v) for v in rng)
    except (TypeError, ValueError):
        raise ValueError(f"range must be a pair (rmin, rmax) of numbers, got {rng!r}") from None
    if not (np.isfinite(rmin) and np.isfinite(rmax)):
        raise ValueError(f"range must be finite, got {rng!r}")
    if rmin < 0:
        raise ValueError(f"range: rmin must be >= 0 (distances are never negative), got {rng!r}")
    if not rmax > rmin:
        raise ValueError(f"range must be increasing (rmin < rmax), got {rng!r}")
    return rmin, rmax


def check_norm(norm):
    norm = str(norm).lower()
    if norm not in _NORMS:
        raise ValueError(f"'{norm}' is an invalid norm. Use 'rdf', 'density' or 'none'.")
    return norm


def mdanalysis_uses_grid(n1, n2, rmax, box: Box, coords) -> bool:
    """Whether MDAnalysis's ``capped_distance`` takes its grid search (else brute force) for
    groups of ``n1`` and ``n2`` atoms (``_determine_method``); ``coords``: both groups'
    positions (only used without a box)."""
    if n1 < 10 or n2 < 10:
        return False
    if n1 * n2 >= 1e8:
        return True
    if box.kind == NO_BOX:
        size = coords.max(axis=0) - coords.min(axis=0)
    elif box.kind == ORTHO:
        size = np.diag(box.vectors32)
    else:
        size = box.vectors32.max(axis=0) - box.vectors32.min(axis=0)
    return not np.any(rmax > 0.3 * size)


def mdanalysis_compat(box: Box, coords, n1, n2, rmax) -> Box:
    """Prepare ``coords`` (in place) and the box as MDAnalysis's capped_distance would.

    ``coords`` holds the positions of both groups (``n1`` then ``n2`` atoms, or only one group
    when it is used with itself). InterRDF's distances come from ``capped_distance``, which
    picks a grid search or brute force from the sizes (``_determine_method``). The grid search
    wraps positions into the box in float32 (without a box it shifts them by their minimum);
    brute force wraps them only for triclinic boxes and, for orthorhombic ones, takes the
    minimum image with a float32 inverse box length. Doing the same operations gives the same
    distances. Returns the box the kernel must use.
    """
    grid = mdanalysis_uses_grid(n1, n2, rmax, box, coords)
    if box.kind == NO_BOX:
        if grid:
            lmin = coords.min(axis=0)
            coords -= lmin - 0.1 * rmax
        return box
    if box.kind == ORTHO and not grid:
        return Box(ORTHO_SCALED, box.vectors32)
    wrap_positions(coords, box)
    return box


def shell_volumes(edges):
    r"""Volumes :math:`\frac{4}{3}\pi(r_{k+1}^3 - r_k^3)` of the spherical shells of ``edges``
    (computed as MDAnalysis does)."""
    vols = np.power(edges, 3)
    return 4 / 3 * np.pi * np.diff(vols)


def block_plan(blocks, n_frames):
    """The block of each of the `n_frames` frames of a run: `blocks` consecutive blocks
    whose sizes differ by at most one frame (as :func:`numpy.array_split` splits)."""
    if isinstance(blocks, bool) or not isinstance(blocks, numbers.Integral):
        raise TypeError(f"blocks must be an integer, got {blocks!r}")
    if blocks < 2:
        raise ValueError(f"blocks must be at least 2 to estimate an error, got {blocks}")
    if blocks > n_frames:
        raise ValueError(
            f"blocks={blocks} is more than the {n_frames} frames of the run: each block needs "
            f"at least one frame"
        )
    sizes = [len(part) for part in np.array_split(np.arange(n_frames), blocks)]
    return np.repeat(np.arange(blocks), sizes)


def block_sem(values):
    r"""Standard error of the mean over blocks (axis 0):
    :math:`\sqrt{\sum_b (x_b - \bar x)^2 / (B (B - 1))}`."""
    values = np.asarray(values, dtype=np.float64)
    return values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])


def _sum_items(values):
    """Aggregate block counts of the workers: arrays are summed; lists of arrays (InterRDF_s)
    are summed item by item."""
    if isinstance(values[0], list):
        return [np.sum(arrays, axis=0) for arrays in zip(*values)]
    return np.sum(values, axis=0)


class _WorkerFrames:
    """The frames of one part, read in order without MDAnalysis's closing rewind.

    MDAnalysis's frame iterators read frame 0 again when they end (``rewind``), which in a
    worker process is one wasted frame read per part. The user's Universe is not in the
    worker, so its position there does not matter.
    """

    def __init__(self, trajectory, frames):
        self._trajectory = trajectory
        self.frames = tuple(int(f) for f in frames)

    def __len__(self):
        return len(self.frames)

    def __iter__(self):
        for frame in self.frames:
            yield self._trajectory[frame]


def histogram_edges(nbins, rng):
    """``numpy.histogram``'s edges (as MDAnalysis builds them) and the bin centres."""
    _, edges = np.histogram([-1], bins=nbins, range=rng)
    return edges, 0.5 * (edges[:-1] + edges[1:])


class RDFBase(ParallelAnalysisMixin, AnalysisBase):
    """Base of the package's RDF analyses (not public API).

    Subclasses set ``self.device``, ``self.precision``, ``self.n_threads`` and ``self.method``
    through
    :meth:`_init_compute` and build their engine with :meth:`_make_engine`. The parallel
    backends of :meth:`run` (MDAnalysis's, ``'node'`` and dask clients) come from
    :class:`~mdakit_fastrdf.backends.ParallelAnalysisMixin`.
    """

    def _init_compute(self, device, precision, n_threads, method="auto"):
        self.device = validate_device(device)
        self.precision = validate_precision(precision)
        self.n_threads = validate_n_threads(n_threads)
        self.method = validate_method(method)
        self._worker_threads = self.n_threads
        self._engine = None
        self._block_plan = None
        self._local_blocks = None
        self._block_arrays = None
        self._run_options = {}

    def _make_engine(self):
        """The engine of this worker (created in the worker, in ``_prepare``)."""
        return Engine(self.device, self.precision, self._worker_threads, method=self.method)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_engine"] = None
        return state

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
        n_total = len(self._setup_computation_groups(
            1, start=start, stop=stop, step=step, frames=frames)[0])
        if n_total == 0:
            raise ValueError(
                f"start={start!r}, stop={stop!r}, step={step!r}, frames={frames!r} select no "
                f"frame of the {len(self._trajectory)} in the trajectory: an RDF needs at "
                "least one frame; choose start/stop/step or frames that include one")
        if blocks is not None:
            self._block_plan = block_plan(blocks, n_total)
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
        super().run(
            start=start, stop=stop, step=step, frames=frames, verbose=verbose,
            n_workers=n_workers, n_parts=n_parts, backend=backend,
            unsupported_backend=unsupported_backend, progressbar_kwargs=progressbar_kwargs,
        )
        if self._block_plan is not None:
            self._conclude_blocks()
        return self

    def _prepare_sliced_trajectory(self, slicer):
        super()._prepare_sliced_trajectory(slicer)
        # In a worker process (multiprocessing, dask processes, the node backend) iterate
        # without the closing rewind; in the process that called run() keep MDAnalysis's
        # behaviour (the trajectory ends on its first frame).
        if (isinstance(slicer, np.ndarray)
                and os.getpid() != getattr(self, "_run_pid", os.getpid())):
            self._sliced_trajectory = _WorkerFrames(self._trajectory, slicer)

    def _compute(self, indexed_frames, verbose=None, *, progressbar_kwargs=None):
        if os.getpid() != getattr(self, "_run_pid", os.getpid()):
            _private_progress_lock()  # a worker process: see the function
        # With blocks: the block of each frame of this worker, from the frame's index in the
        # whole run (the first column of indexed_frames), whatever the split.
        plan = getattr(self, "_block_plan", None)
        self._block_arrays = None
        self._local_blocks = (None if plan is None
                              else plan[np.asarray(indexed_frames, dtype=np.int64)[:, 0]])
        # A GPU engine queues frames asynchronously; collect its counts before the worker's
        # results are handed back.
        super()._compute(indexed_frames, verbose=verbose, progressbar_kwargs=progressbar_kwargs)
        self._synchronize()
        if plan is not None:
            self._finish_blocks()
        return self

    # -- block averaging -----------------------------------------------------------------
    #: Results fields that receive the counts of a frame (lists of arrays for InterRDF_s).
    _count_fields = ("count_uint64",)
    #: Results fields set by ``_conclude`` for which blocks give a standard error.
    _block_outputs = ("rdf",)

    def _ensure_block_arrays(self):
        """Allocate (once per worker, after ``_prepare``) ``results.block_<field>`` for every
        count field, with one row per block, and the views the kernels write into."""
        if self._block_arrays is not None:
            return self._block_arrays
        n_blocks = int(self._block_plan.max()) + 1
        views = {}
        for field in self._count_fields:
            target = self.results[field]
            if isinstance(target, list):
                blocks = [np.zeros((n_blocks,) + t.shape, dtype=t.dtype) for t in target]
                for k, arr in enumerate(blocks):
                    views[(field, k)] = [arr[b] for b in range(n_blocks)]
            else:
                blocks = np.zeros((n_blocks,) + target.shape, dtype=target.dtype)
                views[(field, None)] = [blocks[b] for b in range(n_blocks)]
            self.results["block_" + field] = blocks
        self.results.block_n_frames = np.zeros(n_blocks, dtype=np.int64)
        self.results.block_volume_cum = np.zeros(n_blocks, dtype=np.float64)
        self._block_arrays = views
        return views

    def _frame_out(self, out, field="count_uint64", index=None):
        """The array the counts of the current frame go into.

        Without blocks: `out` (a view of ``results.<field>``, or of its item `index`). With
        blocks: the same view of the row of the frame's block. The views are cached, so that
        a GPU engine sees one output object for all the frames of a block (it adds its queued
        counts into the previous output when the output changes)."""
        if self._local_blocks is None:
            return out
        views = self._ensure_block_arrays()[(field, index)]
        b = self._local_blocks[self._frame_index]
        if views[b].shape != out.shape:
            views[b] = views[b].reshape(out.shape)
        return views[b]

    def _finish_blocks(self):
        """End of a worker's frames: add the blocks' counts into the totals."""
        self._ensure_block_arrays()
        for field in self._count_fields:
            target = self.results[field]
            blocks = self.results["block_" + field]
            if isinstance(target, list):
                for t, b in zip(target, blocks):
                    t += b.sum(axis=0, dtype=b.dtype)
            else:
                target += blocks.sum(axis=0, dtype=blocks.dtype)

    def _block_lookup(self):
        """Aggregators of the block results, for ``_get_aggregator`` (none without
        blocks)."""
        if getattr(self, "_block_plan", None) is None:
            return {}
        lookup = {"block_n_frames": ResultsGroup.ndarray_sum,
                  "block_volume_cum": ResultsGroup.ndarray_sum}
        for field in self._count_fields:
            lookup["block_" + field] = _sum_items
        return lookup

    def _conclude_blocks(self):
        """Normalise every block exactly as ``_conclude`` normalises the whole run (with the
        block's own frames and mean box volume) and add ``block_<name>`` (one row per block)
        and ``<name>_sem`` (the standard error of the block mean)."""
        full = self.results
        saved = {k: getattr(self, k) for k in ("n_frames", "volume_cum") if hasattr(self, k)}
        per_block = {name: [] for name in self._block_outputs}
        try:
            for b in range(len(full.block_n_frames)):
                part = Results(edges=full.edges, bins=full.bins)
                for field in self._count_fields:
                    blocks = full["block_" + field]
                    part[field] = ([x[b] for x in blocks] if isinstance(blocks, list)
                                   else blocks[b])
                if "volume_cum" in full:
                    part.volume_cum = full.block_volume_cum[b]
                self.results = part
                self.n_frames = int(full.block_n_frames[b])
                self._conclude()
                for name in self._block_outputs:
                    if name in part:
                        per_block[name].append(part[name])
        finally:
            self.results = full
            for k, v in saved.items():
                setattr(self, k, v)
        for name, values in per_block.items():
            if not values:
                continue
            if isinstance(values[0], list):  # InterRDF_s: one array per pair of groups
                stacked = [np.stack(v) for v in zip(*values)]
                full["block_" + name] = stacked
                full[name + "_sem"] = [block_sem(s) for s in stacked]
            else:
                stacked = np.stack(values)
                full["block_" + name] = stacked
                full[name + "_sem"] = block_sem(stacked)

    # -- outputs -------------------------------------------------------------------------
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
        from ..outputs.io import save

        return save(self, filename, format=format, metadata=metadata)

    def plot(self, ax=None, **kwargs):
        """Plot the results on a matplotlib Axes (see :func:`mdakit_fastrdf.plot`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        from ..outputs.plotting import plot

        return plot(self, ax=ax, **kwargs)

    def parameters(self):
        """The parameters of the last run, as the JSON-serialisable dict that :meth:`save`
        stores beside the numbers (see :func:`mdakit_fastrdf.io.run_parameters`)."""
        from ..outputs.io import run_parameters

        return run_parameters(self)

    def _synchronize(self):
        if getattr(self, "_engine", None) is not None:
            self._engine.synchronize()

    def _check_histogram_memory(self, n_pairs, nbins, result_arrays):
        """MemoryError, before anything is allocated, when the histograms of this worker do
        not fit in the available memory: the uint64 counts and `result_arrays` float64
        arrays of ``n_pairs x nbins``, and on the CPU the kernel's per-thread uint32
        histograms (``threads x n_pairs x (nbins + 16)``)."""
        avail = available_memory_bytes()
        if avail is None:
            return
        results = (1 + result_arrays) * 8 * n_pairs * nbins
        threads = 0
        if not str(self.device).startswith("cuda"):
            threads = self._worker_threads or available_cpus()
        workspace = 4 * threads * n_pairs * (nbins + 16)
        need = results + workspace
        if need > avail:
            detail = f"{results / 2**30:.2f} GiB of counts and results"
            if workspace:
                detail += (f" and {workspace / 2**30:.2f} GiB of per-thread CPU histograms "
                           f"({threads} threads)")
            raise MemoryError(
                f"nbins={nbins} with {n_pairs} pair histogram(s) needs {need / 2**30:.2f} GiB "
                f"({detail}) but only {avail / 2**30:.2f} GiB are available; use fewer bins "
                f"(nbins), fewer species or fewer threads (n_threads)"
            )

    def _frame_box(self) -> Box:
        """The checked box of the current frame; norm='rdf' without a box is an error.

        Every analysis calls it once at the start of each frame; with blocks it also counts
        the frame and its box volume in the frame's block."""
        ts = self._ts
        box = prepare_box(ts.dimensions)
        if self._local_blocks is not None:  # count the frame and its volume in its block
            self._ensure_block_arrays()
            b = self._local_blocks[self._frame_index]
            self.results.block_n_frames[b] += 1
            self.results.block_volume_cum[b] += ts.volume if box.kind != NO_BOX else 0.0
        if self.norm == "rdf" and box.kind == NO_BOX:
            raise ValueError(
                "norm='rdf' needs the box volume, but this trajectory has no box "
                f"(frame {ts.frame}: dimensions={ts.dimensions}). Use norm='density' or "
                "norm='none', or set the box (e.g. with a transformation)."
            )
        return box

    def _take_positions(self, ix, out):
        """Copy the positions of atoms ``ix`` of this frame into ``out`` (float32), checked."""
        ts = self._ts
        np.take(ts.positions, ix, axis=0, out=out)
        if not np.isfinite(out).all():
            raise ValueError(
                f"coordinates of frame {ts.frame} hold NaN or infinite values; "
                "the RDF of such a frame is undefined"
            )
        return out

    def _deprecated(self, name, use, since="2.0.0"):
        warnings.warn(
            f"The `{name}` attribute was deprecated in MDAnalysis {since} and will be removed "
            f"in MDAnalysis 3.0.0. Please use `results.{use}` instead",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.results[use]
