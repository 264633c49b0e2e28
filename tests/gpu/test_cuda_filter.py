"""Double precision through the float filter on the GPU (``csrc/cuda/filter.cuh``).

The GPU's double-precision frames run the single-precision kernels (FloatRule's arithmetic, bit
for bit the CPU's float kernel) and settle in float64 only the pairs whose float bin coordinate
lies within the frame's bound (``double_filter_delta``, shared with the CPU) of an integer.
The counts must be those of the all-double kernel, which ``_double_filter = 0`` forces, and so
those of the CPU's double precision. Checked here in every launch shape (one window, 1024-thread
blocks, several windows, packed counters, global atomics, dense frames, cell lists), every box
form, with labels, from 0 and from r_min > 0; with pairs placed on the float64 edges and next to
them (where float binning is wrong), and with every pair of a frame flagged (the queue's slow
path). Skips without a CUDA build and a GPU.
"""

import numpy as np
import pytest
from conftest import brute_force_counts, reference_edges, requires_gpu
from tables import GPU_LAUNCHES
from test_cuda import BOXES, make_problem

from mdakit_fastrdf.engine import NO_BOX, Box, _cuda_module

gpu = [pytest.mark.gpu, requires_gpu]
pytestmark = gpu

LAUNCHES = GPU_LAUNCHES


def _histogrammer(kw, nbins):
    m = _cuda_module()
    kw = dict(kw)
    if kw.get("max_window_bins") == "third":
        kw["max_window_bins"] = max(2, nbins // 3)
    return m.CudaHistogrammer(0, kw.get("kernel", "auto"), kw.get("max_window_bins", 0), True,
                              kw.get("method", "allpairs"), 1, "rowmajor")


def _run(problem, launch, scale=1.0, precision="double", frames=1, monkeypatch=None):
    """(counts, last_launch) of the problem on the GPU with the filter's bound times scale."""
    coords, offsets, pairs, edges, box, labels = problem
    kw = dict(LAUNCHES[launch])
    if "threads" in kw:
        monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", kw.pop("threads"))
    h = _histogrammer(kw, len(edges) - 1)
    h._double_filter = scale
    out = np.zeros((len(pairs), len(edges) - 1), dtype=np.uint64)
    for _ in range(frames):
        h.accumulate(np.ascontiguousarray(coords, np.float32), np.asarray(offsets, np.int64),
                     np.asarray(pairs, np.int32), np.asarray(edges, np.float64), box.kind,
                     box.vectors, labels, out, precision == "double")
    h.synchronize()
    return out, h.last_launch


def _cpu(problem, precision="double"):
    from test_cuda import histogram

    return histogram("cpu", problem, precision)[0]


@pytest.mark.parametrize("launch", list(LAUNCHES))
@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("rmin", [0.0, 1.5], ids=["from-0", "from-1.5"])
@pytest.mark.parametrize("box_name", list(BOXES))
def test_filter_equals_all_double(rng, monkeypatch, box_name, rmin, labels, launch):
    """The filter (the default) and the all-double kernel (_double_filter = 0) count the same,
    which is the CPU's double precision; the filter ran (a bound > 0) and settled pairs."""
    problem = make_problem(rng, box_name, sizes=(900, 1100, 300), nbins=700, labels=labels,
                           rmin=rmin)
    out, launch_f = _run(problem, launch, monkeypatch=monkeypatch)
    ref, launch_d = _run(problem, launch, scale=0.0, monkeypatch=monkeypatch)
    assert launch_f["rule"] == "filter" and 0 < launch_f["filter_delta"] < 0.1
    assert launch_f["settled"] > 0
    assert launch_d["rule"] == "exact" and launch_d["filter_delta"] < 0
    assert ref.sum() > 0
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, _cpu(problem))
    if launch == "cells":
        assert launch_f["method"] == "cells"


def _edge_problem(edges, n_origin, box_name="none", below_rmax=False):
    """n_origin atoms at the origin (species 0) and atoms along x whose float64 distance from
    it lies on a bin edge or one or two float32 steps either side (species 1): every pair of
    species 0 with species 1 is near an edge, so the filter flags them all. below_rmax: only
    the edges below the last one (then a frame without a box is dense)."""
    e32 = edges.astype(np.float32)
    if below_rmax:
        e32 = e32[:-1]
    up, down = np.float32(np.inf), np.float32(-np.inf)
    xs = np.concatenate([e32, np.nextafter(e32, up), np.nextafter(e32, down),
                         np.nextafter(np.nextafter(e32, up), up),
                         np.nextafter(np.nextafter(e32, down), down)])
    xs = xs[xs > 0]
    return _along_x(xs, n_origin, edges, box_name), xs


def _along_x(xs, n_origin, edges, box_name):
    """The problem of n_origin atoms at the origin (species 0) and atoms at x = xs
    (species 1), one pair of species, in the box of `box_name`."""
    coords = np.zeros((n_origin + len(xs), 3), np.float32)
    coords[n_origin:, 0] = xs
    offsets = np.array([0, n_origin, len(coords)], np.int64)
    if box_name == "none":
        box = Box(NO_BOX)
    else:
        from mdakit_fastrdf.engine import prepare_box

        box = prepare_box(BOXES[box_name])
    return (coords, offsets, np.array([[0, 1]], np.int32), edges, box, None)


@pytest.mark.parametrize("launch", list(LAUNCHES))
@pytest.mark.parametrize("box_name", ["none", "none-dense", "ortho", "triclinic"])
def test_pairs_on_the_edges(monkeypatch, box_name, launch):
    """Pairs on the float64 edges and next to them, many of them from full i tiles (512 or 2048
    atoms at the origin: dense tiles when the frame has no box): the GPU's double precision
    equals the float64 brute force, the all-double kernel and the CPU; float32 binning (single)
    differs on the same frame. Every pair is flagged, so the queues overflow their fast path."""
    edges = reference_edges(600, (0.0, 12.0))
    n_origin = 2048 if launch in ("threads-1024", "packed", "packed-sweeps") else 512
    dense = box_name == "none-dense"  # no pair at r_max: every pair within it (host bound)
    box_name = "none" if dense else box_name
    problem, xs = _edge_problem(edges, n_origin, box_name, below_rmax=dense)
    dims = BOXES[box_name]
    ref = brute_force_counts(np.zeros((1, 3), np.float32), xs.reshape(-1, 1) * np.array([[1, 0, 0]], np.float32),
                             dims, edges, mdanalysis_path=False) * n_origin
    out, lf = _run(problem, launch, monkeypatch=monkeypatch)
    assert lf["rule"] == "filter" and lf["settled"] >= n_origin * len(xs) // 2
    np.testing.assert_array_equal(out[0].astype(np.int64), ref)
    np.testing.assert_array_equal(out, _run(problem, launch, scale=0.0, monkeypatch=monkeypatch)[0])
    np.testing.assert_array_equal(out, _cpu(problem))
    single = _run(problem, launch, precision="single", monkeypatch=monkeypatch)[0]
    assert (single[0].astype(np.int64) != ref).any()
    if dense and launch in ("auto", "threads-1024", "packed"):
        assert lf["dense"]  # full tiles of the origin atoms: the dense path and its correction


@pytest.mark.parametrize("launch", ["auto", "threads-1024", "packed"])
def test_dense_frames(rng, monkeypatch, launch):
    """Frames whose every pair lies within r_max (no box, full tiles): the dense kernels count
    every pair in float and take the flagged ones back when they settle them."""
    coords = (rng.random((5000, 3)) * 20.0).astype(np.float32)
    problem = (coords, np.array([0, 3000, 5000], np.int64), np.array([[0, 1], [1, 1]], np.int32),
               reference_edges(4000, (0.0, 40.0)), Box(NO_BOX), None)
    out, lf = _run(problem, launch, monkeypatch=monkeypatch, frames=2)
    assert lf["dense"] and lf["rule"] == "filter" and lf["settled"] > 0
    np.testing.assert_array_equal(out, _run(problem, launch, scale=0.0, monkeypatch=monkeypatch,
                                            frames=2)[0])
    np.testing.assert_array_equal(out, 2 * _cpu(problem))


def test_wide_bound_runs_all_in_double(rng):
    """A frame whose bound reaches a tenth of a bin (very fine bins) runs every pair in double,
    as on the CPU: the same counts."""
    problem = make_problem(rng, "triclinic", sizes=(600, 400), pairs=((0, 1),), nbins=200_000)
    out, lf = _run(problem, "auto")
    assert lf["filter_delta"] < 0 and lf["rule"] == "exact"
    np.testing.assert_array_equal(out, _cpu(problem))


def test_filter_scale_is_checked():
    h = _histogrammer({}, 10)
    assert h._double_filter == 1.0
    with pytest.raises(ValueError):
        h._double_filter = 1.5


def test_cells_flush_with_queued_pairs():
    """800,000 atoms at one point, one species with itself, cell lists: every pair lies on
    edge 0, so the filter flags them all, and each block counts more than 2^32 pairs, so it
    flushes its uint32 counters in between (after settling its queue): exactly N^2."""
    from mdakit_fastrdf.engine import Engine

    n = 800_000
    coords = np.zeros((n, 3), np.float32)
    out = np.zeros((1, 10), np.uint64)
    eng = Engine("cuda", "double", method="cells")
    eng.accumulate(coords, np.array([0, n], np.int64), np.array([[0, 0]], np.int32),
                   reference_edges(10, (0.0, 5.0)), Box(NO_BOX), None, out)
    eng.synchronize()
    launch = eng.last_launch
    assert launch["method"] == "cells" and launch["rule"] == "filter"
    assert launch["settled"] == n * (n - 1) // 2
    assert int(out[0, 0]) == n * n and int(out[0, 1:].sum()) == 0


def test_sqrt_approx_error_is_measured():
    """The filter from 0 bins with the hardware's approximate root and builds its bound on the
    largest relative error that root shows over every positive normal float of this device:
    measured once (the same value again), a few ulp at most (PTX documents the instruction as
    approximate only), and the bound of a frame from 0 covers it: at least the CPU's bound."""
    m = _cuda_module()
    e = m.sqrt_approx_error(0)
    assert 0.0 < e < 2.0**-20
    assert m.sqrt_approx_error(0) == e
    rng = np.random.default_rng(5)
    problem = make_problem(rng, "none", sizes=(500, 700), pairs=((0, 1),), nbins=3000)
    _, lf = _run(problem, "auto")
    from mdakit_fastrdf.engine import Engine

    cpu = Engine("cpu", "double", 1, method="allpairs")
    coords, offsets, pairs, edges, box, labels = problem
    cpu.accumulate(coords, offsets, pairs, edges, box, labels,
                   np.zeros((1, len(edges) - 1), np.uint64))
    assert lf["filter_delta"] >= cpu._impl.last_filter[0] > 0


@pytest.mark.parametrize("launch", list(LAUNCHES))
@pytest.mark.parametrize("box_name", ["none", "none-below", "ortho", "triclinic"])
def test_pairs_around_rmax(monkeypatch, box_name, launch):
    """Every float32 distance within a few bounds of r_max, either side (from 0: the GPU's
    coordinate of the approximate root may put a pair whose CPU coordinate is in the widened
    range beyond bin nbins; such pairs must be flagged, never counted in the last bin): the
    float64 brute force, the all-double kernel and the CPU agree with the filter."""
    edges = reference_edges(600, (0.0, 12.0))
    rmax = np.float32(edges[-1])
    below = box_name == "none-below"  # below r_max only (no box: dense tiles where they fit)
    box_name = "none" if below else box_name
    steps = np.arange(-400, 0 if below else 401)
    # float32 neighbours of r_max, k steps away
    bits = rmax.view(np.int32) + steps.astype(np.int32)
    xs = bits.astype(np.int32).view(np.float32)
    n_origin = 2048 if launch in ("threads-1024", "packed", "packed-sweeps") else 512
    problem = _along_x(xs, n_origin, edges, box_name)
    ref = brute_force_counts(np.zeros((1, 3), np.float32),
                             xs.reshape(-1, 1) * np.array([[1, 0, 0]], np.float32),
                             BOXES[box_name], edges, mdanalysis_path=False) * n_origin
    out, lf = _run(problem, launch, monkeypatch=monkeypatch)
    assert lf["rule"] == "filter"
    np.testing.assert_array_equal(out[0].astype(np.int64), ref)
    np.testing.assert_array_equal(out, _run(problem, launch, scale=0.0, monkeypatch=monkeypatch)[0])
    np.testing.assert_array_equal(out, _cpu(problem))
