"""Counts never wrap: per-thread uint32 histograms are flushed into the uint64 totals in time.

Each CPU thread bins into private uint32 histograms and must flush them before any bin could
pass 2^32 - 1: it announces ("reserves") the pairs it is about to bin, at most a flush limit
at a time. Three kinds of test:

* A real one: one call in which a single thread puts more than 2^32 pairs into one bin of the
  cell-list kernel (all atoms in one cell: one strip holds them all). Before the fix the strip
  was announced in one piece and the bin wrapped (4.9e9 pairs came out as 605,032,704). About
  20 s, so it runs in CI; the all-pairs twin is behind ``FASTRDF_SLOW_TESTS``
  (tests/kernels/test_kernel.py has another).
* Cheap ones through a test hook: the flush limit lowered from 2^32 - 1 to a few thousand
  pairs forces hundreds of flushes within one call on every path (all pairs, cell lists with
  k = 1..3, a species with itself and two species, labels, both precisions, 1 to 3 threads);
  counts must not change, and the kernel reports (``_overfull``) whether any single
  announcement exceeded the limit -- which is how a wrap would start.
* Totals in uint64 beyond 2^32 over many frames through the Engine (exact 64-bit sums).
"""

import os

import numpy as np
import pytest

from conftest import brute_force_counts, reference_edges

K = pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")
from mdakit_fastrdf.engine import Box, Engine  # noqa: E402

SLOW = pytest.mark.skipif(not os.environ.get("FASTRDF_SLOW_TESTS"),
                          reason="slow (~25 s): set FASTRDF_SLOW_TESTS=1 to run")


def _call(h, coords, offsets, pairs, edges, labels=None, double=False, kind=0, box=None):
    pairs = np.ascontiguousarray(pairs, dtype=np.int32).reshape(-1, 2)
    out = np.zeros((len(pairs), len(edges) - 1), dtype=np.uint64)
    h.accumulate(np.ascontiguousarray(coords, np.float32), np.asarray(offsets, np.int64), pairs,
                 np.asarray(edges, np.float64), kind, box, labels, out, double)
    return out


def _piled_up(n0, n1):
    """Two species, every atom 0.25 from the origin's x: all pairs at distance 0 (bin 0)."""
    coords = np.zeros((n0 + n1, 3), dtype=np.float32)
    coords[:, 0] = 0.25
    return coords, np.array([0, n0, n0 + n1], np.int64)


@pytest.mark.parametrize("method", ["cells", pytest.param("allpairs", marks=SLOW)])
def test_one_bin_past_2_32_in_one_call(method):
    """One thread, one call, 65,600^2 = 4,303,360,000 > 2^32 pairs in bin 0: the exact count
    comes back (the cell kernel's single strip used to wrap to count - 2^32)."""
    n = 65_600
    coords, offsets = _piled_up(n, n)
    edges = reference_edges(10, (0.0, 5.0))
    h = K.CpuHistogrammer(1, "", method, 2, "rowmajor")
    out = _call(h, coords, offsets, [(0, 1)], edges)
    assert h.last_method == method
    assert int(out[0, 0]) == n * n > 2**32
    assert not out[0, 1:].any()


def _dense_frame(rng, kind):
    n = 700
    if kind == 0:
        coords = (rng.random((n, 3)) * 6.0).astype(np.float32)
        box = None
    else:
        coords = (rng.random((n, 3)) * 9.0).astype(np.float32)
        box = np.diag([9.0, 9.0, 9.0])
    return coords, box


@pytest.mark.parametrize("kind", [0, 1], ids=["nobox", "ortho"])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_lowered_flush_limit_changes_nothing(kind, double):
    """With the flush limit lowered to 3,000 pairs, hundreds of flushes happen inside one
    call on every path; the counts equal those with the normal limit (and, in double
    precision, the brute force), and no single announcement exceeded the limit."""
    rng = np.random.default_rng(11 + kind)
    coords, box = _dense_frame(rng, kind)
    n = len(coords)
    offsets = np.array([0, 400, n], np.int64)
    pairs = [(0, 0), (0, 1), (1, 1)]
    labels = rng.integers(0, 50, n).astype(np.int32)
    edges = reference_edges(16, (0.0, 4.0))
    for lab in (None, labels):
        expected = None
        for method, k, order, threads in [("allpairs", 2, "rowmajor", 1), ("allpairs", 2, "rowmajor", 3),
                                           ("cells", 1, "rowmajor", 2), ("cells", 2, "morton", 1),
                                           ("cells", 3, "hilbert", 3)]:
            normal = _call(K.CpuHistogrammer(threads, "", method, k, order), coords, offsets,
                           pairs, edges, lab, double, kind, box)
            h = K.CpuHistogrammer(threads, "", method, k, order)
            h._flush_limit = 3000
            low = _call(h, coords, offsets, pairs, edges, lab, double, kind, box)
            np.testing.assert_array_equal(low, normal, err_msg=f"{method} k={k} threads={threads}")
            assert not h._overfull, f"{method} k={k}: an announcement exceeded the flush limit"
            if expected is None:
                expected = normal
            np.testing.assert_array_equal(normal, expected)
        if double:
            p0, p1 = coords[:400], coords[400:]
            l0 = None if lab is None else lab[:400]
            l1 = None if lab is None else lab[400:]
            dims = None if box is None else (9.0, 9.0, 9.0, 90.0, 90.0, 90.0)
            ref = [brute_force_counts(p0, p0, dims, edges, labels1=l0, labels2=l0, mdanalysis_path=False),
                   brute_force_counts(p0, p1, dims, edges, labels1=l0, labels2=l1, mdanalysis_path=False),
                   brute_force_counts(p1, p1, dims, edges, labels1=l1, labels2=l1, mdanalysis_path=False)]
            np.testing.assert_array_equal(expected.astype(np.int64), np.array(ref))


@pytest.mark.parametrize("method", ["cells", "allpairs"])
def test_piled_up_atoms_are_announced_in_chunks(method):
    """All atoms in one cell: the cell kernel's strip (1,500 x 1,500 pairs) is far above a
    lowered limit of 2,000; it must be announced in chunks of rows, never in one piece (the
    bug that wrapped real counts past 2^32, detected here without 2^32 pairs)."""
    coords, offsets = _piled_up(1500, 1500)
    edges = reference_edges(10, (0.0, 5.0))
    for pairs in ([(0, 1)], [(0, 0)], [(0, 0), (0, 1), (1, 1)]):
        h = K.CpuHistogrammer(2, "", method, 2, "rowmajor")
        h._flush_limit = 2000
        out = _call(h, coords, offsets, pairs, edges)
        assert not h._overfull
        assert h.last_method == method
        assert [int(r[0]) for r in out] == [1500 * 1500] * len(pairs)


def test_flush_limit_hook_is_validated():
    h = K.CpuHistogrammer(1)
    assert h._flush_limit == 2**32 - 1
    for bad in (0, 2**32):
        with pytest.raises((ValueError, TypeError), match="_flush_limit"):
            h._flush_limit = bad


def test_engine_totals_past_2_32_over_frames():
    """Frames through the Engine add into uint64 totals: starting 1,000 below 2^32, 40
    frames of a 300 x 300 system cross it and the totals are exact (a uint32 or float32
    accumulator would not be)."""
    coords, offsets = _piled_up(300, 300)
    coords[300:, 0] = 1.75  # species 1 is 1.5 from species 0: bin 3 of 10 over (0, 5)
    edges = reference_edges(10, (0.0, 5.0))
    pairs = np.array([[0, 1], [0, 0]], np.int32)
    out = np.zeros((2, 10), np.uint64)
    out[0, 3] = out[1, 0] = 2**32 - 1000
    for precision in ("single", "double"):
        for method in ("allpairs", "cells"):
            e = Engine("cpu", precision, 2, method=method)
            for _ in range(10):
                e.accumulate(coords, offsets, pairs, edges, Box(0), None, out)
    assert int(out[0, 3]) == 2**32 - 1000 + 40 * 300 * 300
    assert int(out[1, 0]) == 2**32 - 1000 + 40 * 300 * 300  # 300 x 299 ordered + 300 self
    assert int(out[0, 0]) == 0 and int(out[1, 3]) == 0
