"""Cell lists on the GPU: identical counts to the CPU's all-pairs kernel, bit for bit.

Every test here needs a GPU and skips cleanly without one (CI has none); they run on the
lent GPU machine through ``benchmarks/gpu_run.sh tests``.
"""

import numpy as np
import pytest

from conftest import reference_edges, requires_gpu
from test_cells import ORTHO_SCALED, _random_case

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.engine import Box, Engine, prepare_box

pytestmark = [pytest.mark.gpu, requires_gpu]


def _engine_box(kind, dims):
    if kind == 0:
        return Box(0)
    box = prepare_box(np.asarray(dims, dtype=np.float64))
    if kind == ORTHO_SCALED:
        return Box(ORTHO_SCALED, box.vectors32)
    if kind == 1 and box.kind != 1:  # an orthorhombic request stays orthorhombic
        raise AssertionError
    return box


def _run(device, method, coords, offsets, pairs, edges, box, labels, precision, frames=1, **kw):
    out = np.zeros((len(pairs), len(edges) - 1), np.uint64)
    eng = Engine(device, precision, method=method, **kw)
    for _ in range(frames):
        eng.accumulate(np.ascontiguousarray(coords, np.float32), np.asarray(offsets, np.int64),
                       np.asarray(pairs, np.int32).reshape(-1, 2), edges, box, labels, out)
    eng.synchronize()
    return out, eng


@pytest.mark.parametrize("seed", range(24))
def test_gpu_cells_identical_to_cpu_allpairs(seed):
    """Random frames (every box kind, species sizes 0 and 1, labels, duplicates, r_max up to
    0.8 of the box): the GPU cell kernel equals the CPU all-pairs kernel in both precisions,
    for cell sides r_max, r_max/2 and the three column orders."""
    rng = np.random.default_rng(2000 + seed)
    kind, dims, coords, offsets, pairs, edges, labels = _random_case(rng)
    box = _engine_box(kind, dims)
    pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
    for precision in ("single", "double"):
        ref, _ = _run("cpu", "allpairs", coords, offsets, pairs, edges, box, labels, precision)
        for k, order in ((1, "rowmajor"), (2, "hilbert"), (1, "morton")):
            got, eng = _run("cuda", "cells", coords, offsets, pairs, edges, box, labels, precision,
                            frames=2, cells_per_cutoff=k, cell_order=order)
            if offsets[-1] > 0:  # (a frame without atoms has nothing to sort)
                assert eng.last_launch["method"] == "cells"
            np.testing.assert_array_equal(got, 2 * ref, err_msg=f"{precision} k={k} {order}")


@pytest.mark.parametrize("kernel,max_window", [("global", 0), ("auto", 50)])
def test_gpu_cells_global_kernel(kernel, max_window):
    """64-bit atomics (asked for, or because the histogram does not fit one shared window)."""
    rng = np.random.default_rng(11)
    kind, dims = 1, (40.0, 41.0, 42.0, 90.0, 90.0, 90.0)
    coords = (rng.random((5000, 3)) * 40).astype(np.float32)
    offsets = np.array([0, 2000, 5000], np.int64)
    pairs = np.array([[0, 0], [0, 1], [1, 1]], np.int32)
    edges = reference_edges(300, (0.0, 9.0))
    box = _engine_box(kind, dims)
    ref, _ = _run("cpu", "allpairs", coords, offsets, pairs, edges, box, None, "single")
    got, eng = _run("cuda", "cells", coords, offsets, pairs, edges, box, None, "single",
                    kernel=kernel, max_window_bins=max_window)
    assert eng.last_launch["kernel"] == "global"
    np.testing.assert_array_equal(got, ref)


def test_gpu_cells_trajectory_with_changing_grid():
    """Frames whose grid changes (no box: the bounding box grows; periodic: the box length
    changes) rebuild the device tables between queued frames; counts equal the CPU's."""
    rng = np.random.default_rng(12)
    edges = reference_edges(100, (0.0, 6.0))
    offsets = np.array([0, 3000], np.int64)
    pairs = np.array([[0, 0]], np.int32)
    out_gpu = np.zeros((1, 100), np.uint64)
    out_cpu = np.zeros((1, 100), np.uint64)
    gpu = Engine("cuda", "single", method="cells")
    cpu = Engine("cpu", "single", method="allpairs")
    for f in range(6):
        scale = 30.0 + 8.0 * f
        coords = (rng.random((3000, 3)) * scale).astype(np.float32)
        box = Box(0) if f % 2 == 0 else prepare_box(np.array([scale, scale, scale, 90, 90, 90.0]))
        gpu.accumulate(coords, offsets, pairs, edges, box, None, out_gpu)
        cpu.accumulate(coords, offsets, pairs, edges, box, None, out_cpu)
    gpu.synchronize()
    np.testing.assert_array_equal(out_gpu, out_cpu)


def test_gpu_cells_counts_beyond_uint32_in_one_block():
    """800,000 atoms at one point, one species with itself: every pair in bin 0. Each block
    sees far more than 2^32 pairs, so its uint32 shared histogram must be flushed in between;
    the total is exactly N^2 (ordered pairs and self pairs)."""
    n = 800_000
    coords = np.zeros((n, 3), np.float32)
    edges = reference_edges(10, (0.0, 5.0))
    out, eng = _run("cuda", "cells", coords, np.array([0, n], np.int64), np.array([[0, 0]], np.int32),
                    edges, Box(0), None, "single")
    assert eng.last_launch["method"] == "cells"
    assert int(out[0, 0]) == n * n
    assert int(out[0, 1:].sum()) == 0


@pytest.mark.parametrize("precision", ["single", "double"])
def test_gpu_cells_interrdf_on_adk(adk_water, precision):
    """adk in water, OW-OW with exclusion_block: GPU cells equal the CPU (all pairs)."""
    ow = adk_water.select_atoms("name OW")
    kw = dict(nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1), precision=precision)
    cpu = InterRDF(ow, ow, device="cpu", method="allpairs", **kw).run(stop=3)
    gpu = InterRDF(ow, ow, device="cuda", method="cells", **kw).run(stop=3)
    np.testing.assert_array_equal(gpu.results.count_uint64, cpu.results.count_uint64)
    assert gpu._engine.last_method == "cells"


def test_gpu_auto_picks_cells_for_a_large_box():
    rng = np.random.default_rng(13)
    n = 200_000
    side = (n / 0.0334) ** (1 / 3)
    coords = (rng.random((n, 3)) * side).astype(np.float32)
    box = prepare_box(np.array([side, side, side, 90, 90, 90.0]))
    out, eng = _run("cuda", "auto", coords, np.array([0, n], np.int64), np.array([[0, 0]], np.int32),
                    reference_edges(200, (0.0, 15.0)), box, None, "single")
    assert eng.last_launch["method"] == "cells"
    # the cells' atoms are in spatial order: most chunks of j atoms take one image per thread,
    # those across the box's faces too (tile_pairs; here every one did)
    common, _, total = eng.last_launch["image_chunks"]
    assert 0.5 * total < common <= total and total > 0, (common, total)
    ref, _ = _run("cpu", "cells", coords, np.array([0, n], np.int64), np.array([[0, 0]], np.int32),
                  reference_edges(200, (0.0, 15.0)), box, None, "single")
    np.testing.assert_array_equal(out, ref)
