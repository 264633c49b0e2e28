"""Hostile inputs for InterRDF, SpeciesRDF and InterRDF_s, the Engine and the kernels.

Every one either raises an exception whose message names the parameter at fault, or has a
documented, correct result (checked against the float64 brute force). Huge histograms are
refused with the size *before* anything large is allocated (tracemalloc sees numpy's
allocations).
"""

import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import MDAnalysis as mda
from conftest import (
    brute_force_counts,
    examples,
    make_universe,
    random_positions_in_box,
    reference_edges,
)

from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF
from mdakit_fastrdf.analysis import memory as _memory
from mdakit_fastrdf.engine import MAX_BINS, Box, Engine, prepare_box

K = pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")

BOX = (18.0, 19.0, 20.0, 90.0, 90.0, 90.0)
CLASSES = ["InterRDF", "SpeciesRDF", "InterRDF_s"]


def _universe(coords=None, dims=BOX, n=24, n_frames=2, seed=1):
    if coords is None:
        rng = np.random.default_rng(seed)
        if dims is None:
            coords = (rng.random((n_frames, n, 3)) * 15).astype(np.float32)
        else:
            coords = random_positions_in_box(rng, n, dims, n_frames=n_frames)
    n = coords.shape[1]
    names = ["O" if i % 3 == 0 else "H" for i in range(n)]
    return make_universe(coords, dims, atoms_per_residue=3, names=names)


def _make(cls, u, ag1=None, ag2=None, **kw):
    """The analysis `cls` over groups ag1/ag2 (default: first and second half)."""
    n = len(u.atoms)
    ag1 = u.atoms[: n // 2] if ag1 is None else ag1
    ag2 = u.atoms[n // 2:] if ag2 is None else ag2
    if cls == "InterRDF":
        return InterRDF(ag1, ag2, **kw)
    if cls == "SpeciesRDF":
        # the union of two groups is static and non-empty: hand a bad ag1 over as it is
        bad = isinstance(ag1, mda.core.groups.UpdatingAtomGroup) or len(ag1) == 0
        return SpeciesRDF(ag1 if bad else ag1 | ag2, by="name", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # InterRDF_s's `u`
        return InterRDF_s(u, [[ag1, ag2]], **kw)


# ---------------------------------------------------------------------------------------
# Coordinates
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("cls", CLASSES)
def test_non_finite_coordinates(cls, bad):
    """A NaN or infinite position of an atom in the groups makes run() raise a ValueError
    naming the coordinates and the frame (never silently dropped pairs)."""
    rng = np.random.default_rng(2)
    coords = random_positions_in_box(rng, 24, BOX, n_frames=3)
    coords[1, 5, 2] = bad
    u = _universe(coords)
    with pytest.raises(ValueError, match="coordinates of frame 1"):
        _make(cls, u).run()


@pytest.mark.parametrize("double", [False, True])
def test_non_finite_coordinates_kernel(double):
    coords = np.zeros((4, 3), np.float32)
    coords[2, 1] = np.inf
    out = np.zeros((1, 3), np.uint64)
    with pytest.raises(ValueError, match="coordinates"):
        K.CpuHistogrammer(1).accumulate(coords, np.array([0, 4], np.int64),
                                        np.array([[0, 0]], np.int32), np.linspace(0, 3, 4),
                                        0, None, None, out, double)
    assert not out.any()


# ---------------------------------------------------------------------------------------
# Boxes
# ---------------------------------------------------------------------------------------

BAD_BOXES = {
    "zero-length": [18.0, 0.0, 20.0, 90, 90, 90],
    "negative-length": [18.0, -19.0, 20.0, 90, 90, 90],
    "nan-length": [18.0, np.nan, 20.0, 90, 90, 90],
    "inf-length": [np.inf, 19.0, 20.0, 90, 90, 90],
    "zero-angle": [18.0, 19.0, 20.0, 0, 90, 90],
    "180-angle": [18.0, 19.0, 20.0, 90, 180, 90],
    "negative-angle": [18.0, 19.0, 20.0, 90, 90, -60],
    "angles-do-not-close": [18.0, 19.0, 20.0, 10, 10, 170],
    "nan-angle": [18.0, 19.0, 20.0, 90, np.nan, 90],
}


@pytest.mark.parametrize("dims", BAD_BOXES.values(), ids=BAD_BOXES.keys())
def test_prepare_box_rejects(dims):
    with pytest.raises(ValueError, match="box"):
        prepare_box(np.array(dims, dtype=np.float32))


@pytest.mark.parametrize("dims", BAD_BOXES.values(), ids=BAD_BOXES.keys())
@pytest.mark.parametrize("cls", CLASSES)
def test_bad_box_in_trajectory(cls, dims):
    """A frame whose box has a zero, negative or non-finite length or angles that describe
    no cell makes run() raise a ValueError naming the box, for any norm."""
    rng = np.random.default_rng(3)
    coords = (rng.random((2, 24, 3)) * 15).astype(np.float32)
    boxes = np.array([BOX, dims], dtype=np.float32)
    u = _universe(coords, dims=boxes)
    with pytest.raises(ValueError, match="box"):
        _make(cls, u, norm="density").run()
    _make(cls, u, norm="density").run(stop=1)  # the good frame is fine


def test_all_zero_box_means_no_box():
    """MDAnalysis's convention: dimensions of all zeros (or None) mean no periodic box."""
    assert prepare_box(np.zeros(6, np.float32)).kind == 0
    assert prepare_box(None).kind == 0


@pytest.mark.parametrize("kind,box", [
    (kind, box) for kind in (1, 2, 3)
    for box in (np.diag([10.0, 0.0, 10.0]), np.diag([10.0, np.nan, 10.0]),
                np.diag([10.0, np.inf, 10.0]), np.diag([10.0, -1.0, 10.0]),
                np.array([[10.0, 0, 0], [20.0, 0, 0], [0, 0, 10.0]]))
    # a triclinic box is only its lattice: a negative vector spans a valid one (see below)
    if not (kind == 2 and np.nanmin(np.diag(box)) < 0)])
def test_kernel_rejects_degenerate_boxes(kind, box):
    coords = np.zeros((4, 3), np.float32)
    out = np.zeros((1, 3), np.uint64)
    with pytest.raises(ValueError, match="box"):
        K.CpuHistogrammer(1).accumulate(coords, np.array([0, 4], np.int64),
                                        np.array([[0, 0]], np.int32), np.linspace(0, 3, 4),
                                        kind, np.ascontiguousarray(box), None, out, True)


def test_triclinic_box_with_a_reversed_vector_is_its_lattice():
    """Box vectors (rows) with a negative entry on the diagonal span the same lattice as the
    reversed vector; the triclinic kernel treats them as that lattice (documented, correct)."""
    rng = np.random.default_rng(5)
    box = np.array([[12.0, 0, 0], [3.0, -11.0, 0], [-2.0, 4.0, 13.0]])
    coords = (rng.random((60, 3)) * 12).astype(np.float32)
    edges = reference_edges(20, (0.0, 9.0))
    for method in ("allpairs", "cells"):
        out = np.zeros((1, 20), np.uint64)
        K.CpuHistogrammer(1, "", method).accumulate(
            coords, np.array([0, 60], np.int64), np.array([[0, 0]], np.int32), edges, 2, box,
            None, out, True)
        np.testing.assert_array_equal(
            out[0].astype(np.int64),
            brute_force_counts(coords, coords, box, edges, mdanalysis_path=False))


def test_kernel_rejects_unknown_box_kind():
    out = np.zeros((1, 3), np.uint64)
    with pytest.raises(ValueError, match="box_kind"):
        K.CpuHistogrammer(1).accumulate(np.zeros((4, 3), np.float32), np.array([0, 4], np.int64),
                                        np.array([[0, 0]], np.int32), np.linspace(0, 3, 4),
                                        7, None, None, out, True)


# ---------------------------------------------------------------------------------------
# range and nbins
# ---------------------------------------------------------------------------------------

BAD_RANGES = {"nan-min": (np.nan, 5.0), "nan-max": (0.0, np.nan), "both-nan": (np.nan, np.nan),
              "inf": (0.0, np.inf), "empty": (3.0, 3.0), "decreasing": (5.0, 1.0),
              "negative": (-2.0, 5.0), "scalar": 5.0, "three": (0, 1, 2), "strings": ("a", "b")}


@pytest.mark.parametrize("rng_range", BAD_RANGES.values(), ids=BAD_RANGES.keys())
@pytest.mark.parametrize("cls", CLASSES)
def test_bad_range(cls, rng_range):
    with pytest.raises(ValueError, match="range"):
        _make(cls, _universe(), range=rng_range)


EDGES = {
    "nan": np.array([0.0, np.nan, 2.0]),
    "inf": np.array([0.0, 1.0, np.inf]),
    "decreasing": np.array([2.0, 1.0, 0.0]),
    "constant": np.array([1.0, 1.0, 1.0]),
    "non-uniform": np.array([0.0, 0.1, 0.2, 5.0]),
    "slightly-off": np.linspace(0, 5, 11) + np.r_[0, 0, 0, 1e-9, 0, 0, 0, 0, 0, 0, 0],
}


@pytest.mark.parametrize("edges", EDGES.values(), ids=EDGES.keys())
def test_kernel_refuses_edges_it_cannot_bin_exactly(edges):
    """The kernels reproduce numpy.histogram's binning for uniform edges only; NaN,
    infinite, non-increasing or non-uniform edges are a ValueError naming edges (they used to
    be binned silently, and wrongly)."""
    out = np.zeros((1, len(edges) - 1), np.uint64)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="edges"):
        K.CpuHistogrammer(1).accumulate((rng.random((10, 3)) * 5).astype(np.float32),
                                        np.array([0, 10], np.int64), np.array([[0, 0]], np.int32),
                                        edges, 0, None, None, out, True)


@pytest.mark.parametrize("rng_range,nbins", [((0.0, 15.0), 75), ((2.5, 3.5), 4000),
                                             ((1000.0, 1000.5), 7), ((0.0, 1e-3), 3)])
def test_numpy_edges_are_accepted(rng_range, nbins):
    """numpy's own edges pass the uniformity check, also far from zero or very narrow."""
    edges = reference_edges(nbins, rng_range)
    out = np.zeros((1, nbins), np.uint64)
    K.CpuHistogrammer(1).accumulate(np.zeros((3, 3), np.float32), np.array([0, 3], np.int64),
                                    np.array([[0, 0]], np.int32), edges, 0, None, None, out, True)


@pytest.mark.parametrize("cls", ["InterRDF", "SpeciesRDF"])
@pytest.mark.parametrize("nbins", [MAX_BINS + 1, 10**12, 2**63])
def test_nbins_above_the_kernel_limit(cls, nbins):
    """More bins than the kernels take (4,000,000) is a ValueError naming nbins, raised by
    the constructor before anything is allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="nbins"):
            _make(cls, _universe(), nbins=nbins)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20


@pytest.mark.parametrize("cls", CLASSES)
def test_histograms_larger_than_memory(cls, monkeypatch):
    """Histograms that do not fit in the available memory are a MemoryError that names
    nbins and gives the size, raised before they are allocated. (The memory is faked small:
    2 MiB available.)"""
    monkeypatch.setattr(_memory, "available_memory_bytes", lambda: 2 * 2**20)
    import mdakit_fastrdf.analysis.rdf_s as rdf_s_module

    monkeypatch.setattr(rdf_s_module, "available_memory_bytes", lambda: 2 * 2**20)
    r = _make(cls, _universe(), nbins=200_000, norm="density")
    tracemalloc.start()
    try:
        with pytest.raises(MemoryError, match=r"(?s)nbins|bins.*GiB|GiB.*bins"):
            r.run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * 2**20, f"{peak} bytes were allocated before the MemoryError"


def test_cpu_workspace_larger_than_the_machine():
    """A direct kernel call whose per-thread histograms (threads x pairs x (nbins + 16) x 4
    bytes) exceed the machine's memory is a MemoryError with the size, raised before the
    threads allocate them (here 100,000 threads x 10 pairs x 1M bins: 4 TB; ``out`` itself
    is 80 MB of untouched zero pages)."""
    n_pairs, nbins = 10, 1_000_000
    out = np.zeros((n_pairs, nbins), np.uint64)
    h = K.CpuHistogrammer(100_000)
    with pytest.raises(MemoryError, match=r"nbins.*GiB.*100000 threads x 10 species pairs"):
        h.accumulate(np.zeros((4, 3), np.float32), np.array([0, 4], np.int64),
                     np.zeros((n_pairs, 2), np.int32), reference_edges(nbins, (0.0, 10.0)),
                     0, None, None, out, False)


# ---------------------------------------------------------------------------------------
# Groups
# ---------------------------------------------------------------------------------------


def test_groups_from_different_universes():
    u1, u2 = _universe(seed=1), _universe(seed=2)
    with pytest.raises(ValueError, match="Universe"):
        InterRDF(u1.atoms[:5], u2.atoms[:5])
    with pytest.raises(ValueError, match="Universe"):
        SpeciesRDF(u1.atoms, by=[u1.atoms[:5], u2.atoms[5:9]])
    with pytest.raises(ValueError, match="Universe"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        InterRDF_s(u1, [[u1.atoms[:3], u1.atoms[3:6]], [u1.atoms[:3], u2.atoms[3:6]]])


@pytest.mark.parametrize("cls", [c for c in CLASSES if c != "InterRDF"])
def test_updating_atomgroups_are_refused(cls):
    """An UpdatingAtomGroup changes size between frames, which the normalisations of the
    site and species analyses do not describe: a ValueError naming the group, pointing to a
    static group or InterRDF (which takes them: tests/analysis/test_updating.py)."""
    u = _universe()
    upd = u.select_atoms("prop x < 8", updating=True)
    assert isinstance(upd, mda.core.groups.UpdatingAtomGroup)
    with pytest.raises(ValueError, match="UpdatingAtomGroup"):
        _make(cls, u, ag1=upd, ag2=u.atoms[:4])
    if cls == "SpeciesRDF":
        with pytest.raises(ValueError, match="UpdatingAtomGroup"):
            SpeciesRDF(u.atoms, by=[upd, u.atoms[:4]])


@pytest.mark.parametrize("cls", CLASSES)
def test_empty_groups(cls):
    u = _universe()
    with pytest.raises(ValueError, match="empty"):
        _make(cls, u, ag1=u.atoms[[]], ag2=u.atoms[:4])


# ---------------------------------------------------------------------------------------
# Trajectories without a box
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_no_box_with_norm_rdf(cls):
    """norm='rdf' needs the box volume: without a box run() raises a ValueError saying so."""
    u = _universe(dims=None)
    with pytest.raises(ValueError, match="norm='rdf'.*no box"):
        _make(cls, u).run()


@pytest.mark.parametrize("norm", ["density", "none"])
@pytest.mark.parametrize("cls", CLASSES)
def test_no_box_without_norm_rdf_is_the_open_system(cls, norm):
    """Without a box and norm='density' or 'none' the distances are plain (non-periodic)
    distances: the counts equal the float64 brute force without periodic images."""
    u = _universe(dims=None, n=24, n_frames=2)
    r = _make(cls, u, norm=norm, nbins=30, range=(0.0, 12.0), precision="double").run()
    g1, g2 = u.atoms[:12], u.atoms[12:]
    edges = reference_edges(30, (0.0, 12.0))
    ref = np.zeros(30, np.int64)
    site = np.zeros((12, 12, 30))
    for ts in u.trajectory:
        ref += brute_force_counts(g1.positions, g2.positions, None, edges)
        if cls == "InterRDF_s":
            for i in range(12):
                for j in range(12):
                    d = np.linalg.norm((g2.positions[j] - g1.positions[i]).astype(np.float64))
                    site[i, j] += np.histogram([d], bins=edges)[0]
    if cls == "InterRDF":
        np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    elif cls == "SpeciesRDF":
        total = np.zeros(30, np.int64)
        for row, (a, b) in zip(r.results.count_uint64, r.results.pair_labels):
            total += row.astype(np.int64)
        assert total.sum() > 0
        for (a, b), row in zip(r.results.pair_labels, r.results.count_uint64):
            sa = u.atoms[np.array([n == a for n in u.atoms.names])]
            sb = u.atoms[np.array([n == b for n in u.atoms.names])]
            exp = np.zeros(30, np.int64)
            for ts in u.trajectory:
                exp += brute_force_counts(sa.positions, sb.positions, None, edges)
            np.testing.assert_array_equal(row.astype(np.int64), exp, err_msg=f"{(a, b)}")
    else:
        np.testing.assert_allclose(r.results.count[0], site, atol=0)
    assert "volume_cum" not in r.results


def test_box_appearing_mid_trajectory_with_norm_rdf():
    """A trajectory whose later frame lacks the box fails at that frame with norm='rdf'."""
    rng = np.random.default_rng(9)
    coords = random_positions_in_box(rng, 24, BOX, n_frames=2)
    u = _universe(coords, dims=np.array([BOX, [0, 0, 0, 0, 0, 0]], np.float32))
    with pytest.raises(ValueError, match="frame 1"):
        InterRDF(u.atoms[:12], u.atoms[12:]).run()


# ---------------------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------------------


def test_engine_far_outside_the_box():
    """A position more than 2^20 box widths from the origin would break the minimum
    image's rounding: refused with a message naming the coordinates."""
    e = Engine("cpu", "single", 1)
    coords = np.zeros((4, 3), np.float32)
    coords[1, 0] = 3e7
    box = prepare_box(np.array([10, 10, 10, 90, 90, 90], np.float32))
    with pytest.raises(ValueError, match="coordinates"):
        e.accumulate(coords, np.array([0, 4], np.int64), np.array([[0, 0]], np.int32),
                     reference_edges(3, (0.0, 3.0)), box, None, np.zeros((1, 3), np.uint64))


def test_engine_rmax_far_beyond_a_triclinic_cell():
    """r_max of more than 50 cell widths in a triclinic box: a ValueError naming range."""
    e = Engine("cpu", "double", 1)
    box = prepare_box(np.array([2, 2, 2, 60, 70, 80], np.float32))
    with pytest.raises(ValueError, match="range"):
        e.accumulate(np.zeros((4, 3), np.float32), np.array([0, 4], np.int64),
                     np.array([[0, 0]], np.int32), reference_edges(3, (0.0, 300.0)), box, None,
                     np.zeros((1, 3), np.uint64))
    assert isinstance(box, Box)


# No kernel call, only box arithmetic: cheap enough for ten times the default count,
# which covers many more of the skewed cells.
@settings(max_examples=examples(300))
@given(lengths=st.tuples(*[st.floats(0.5, 500.0)] * 3),
       angles=st.one_of(st.just((90.0, 90.0, 90.0)),
                        st.tuples(*[st.one_of(st.just(90.0), st.floats(20.0, 160.0))] * 3)))
def test_prepared_box_is_mdanalysis_box(lengths, angles):
    """prepare_box's vectors and volume come from one ``triclinic_vectors`` call in float64:
    they are MDAnalysis's ``triclinic_vectors`` (float32) and ``ts.volume``
    (``box_volume``) bit for bit, and a box whose angles make no cell is a ValueError."""
    from MDAnalysis.lib.mdamath import box_volume, triclinic_vectors

    from mdakit_fastrdf.engine import box as box_module

    dims = np.array([*lengths, *angles], dtype=np.float32)
    box_module._last_box = None  # not the box of an earlier example (prepare_box's cache)
    reference = triclinic_vectors(dims)
    if not np.any(reference):
        with pytest.raises(ValueError, match="box"):
            prepare_box(dims)
        return
    box = prepare_box(dims)
    assert box.vectors32.dtype == np.float32
    np.testing.assert_array_equal(box.vectors32, reference)
    assert box.volume == box_volume(dims)
    assert prepare_box(dims.copy()) is box  # the same box again: kept
    with pytest.raises(ValueError):
        box.vectors32[0, 0] = 1.0  # read-only: the kept box cannot be changed
