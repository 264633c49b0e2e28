"""Property tests: every kernel path against the independent float64 brute force.

Hypothesis draws one frame at a time: a box (none, orthorhombic, orthorhombic with
MDAnalysis's brute-force arithmetic, triclinic, and near-degenerate triclinic cells with an
angle within a few degrees of 0 or 180 or a cell a fifth as thick as it is long), up to
three species of 0 to 40 atoms, some of them duplicated, positions partly outside the
primary cell, optional exclusion labels, every species pair (same and different species),
a range from far below to above the cell's widths and 1 to 50 bins. In "lattice" frames the
atoms sit on a grid commensurate with the bins, so that many distances fall exactly on an
edge or exactly on ``r_max`` (3-4-5-like displacements give exact square roots).

Every path that exists runs on the same frame: CPU all pairs, CPU cell lists with 1, 2 and 3
cells per cutoff in each column order (row-major, Morton, Hilbert), 1 to 3 threads, a SIMD
variant drawn among those this CPU runs (baseline, AVX2, AVX-512), and the CUDA all-pairs and
cell kernels when a GPU is present; in double and single precision. The site-site kernel of
InterRDF_s gets frames of its own (two site groups of 0 to 6 atoms, the same group twice,
shared atoms) against :func:`conftest.site_counts_reference`, InterRDF_s's binning rule.

* Double precision must equal :func:`conftest.brute_force_counts` bin for bin.
* Single precision may differ only through pairs within float32 rounding of an edge, each
  moving one bin (or in/out of the range); :func:`conftest.assert_only_near_edge_pairs_moved`
  computes that set from the reference distances and checks it. CPU all pairs and cell lists
  must also agree with each other bit for bit (the same arithmetic on the same pairs).

The example counts are fixed and the search derandomised so CI is deterministic. They are
their own (the whole point of this module is a wide search over cheap frames), scaled like the
Hypothesis profile (``HYPOTHESIS_PROFILE=thorough``, see conftest.py); set
``FASTRDF_HYPOTHESIS_EXAMPLES`` (e.g. 2000) to give every test here that count.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import (
    GPU_UNAVAILABLE,
    assert_only_near_edge_pairs_moved,
    box_matrix,
    examples,
    float32_distance_tolerance,
    pair_distances,
    pair_mask,
    reference_edges,
    requires_gpu,
    site_counts_reference,
)

K = pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")

NO_BOX, ORTHO, TRICLINIC, ORTHO_SCALED = 0, 1, 2, 3
CELL_PATHS = [(k, order) for k in (1, 2, 3) for order in ("rowmajor", "morton", "hilbert")]
ISAS = list(K.usable_variants())  # SIMD variants compiled and runnable here
# Counts of their own, not the profile's 30: a frame here costs milliseconds and the wide
# search is what this module is for (300 CPU, 200 site-kernel frames); only 60 GPU frames,
# whose kernel launches dominate the time.
N_EXAMPLES = int(os.environ.get("FASTRDF_HYPOTHESIS_EXAMPLES", "0")) or None

PROPERTY_SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------


def _f32(x):
    return float(np.float32(x))


@st.composite
def boxes(draw, lattice=False, spacing=0.25):
    """(box_kind, dims or (3, 3) vectors or None)."""
    if lattice:
        kind = draw(st.sampled_from([NO_BOX, ORTHO, ORTHO_SCALED]))
        if kind == NO_BOX:
            return kind, None
        lengths = [spacing * draw(st.integers(16, 80)) for _ in range(3)]
        return kind, tuple(lengths) + (90.0, 90.0, 90.0)
    kind = draw(st.sampled_from([NO_BOX, ORTHO, ORTHO_SCALED, TRICLINIC, TRICLINIC]))
    if kind == NO_BOX:
        return kind, None
    lengths = [_f32(draw(st.floats(8.0, 30.0))) for _ in range(3)]
    if kind in (ORTHO, ORTHO_SCALED):
        return kind, tuple(lengths) + (90.0, 90.0, 90.0)
    shape = draw(st.sampled_from(["skewed", "sharp", "obtuse", "flat"]))
    angles = [_f32(draw(st.floats(45.0, 135.0))) for _ in range(3)]
    if shape == "sharp":  # an angle within a few degrees of 0: a very thin cell
        angles[draw(st.integers(0, 2))] = _f32(draw(st.floats(3.0, 10.0)))
    elif shape == "obtuse":
        angles[draw(st.integers(0, 2))] = _f32(draw(st.floats(165.0, 177.0)))
    elif shape == "flat":  # one side a fifth of the others
        lengths[2] = _f32(lengths[0] * draw(st.floats(0.2, 0.35)))
    dims = tuple(lengths) + tuple(angles)
    try:
        b = box_matrix(dims)
    except AssertionError:  # the angles do not close a cell
        assume(False)
    assume(abs(np.linalg.det(b)) > 1e-3 * np.prod(lengths))
    return kind, np.ascontiguousarray(b)


def reach(kind, dims):
    """Reach of the histogram: the cell's smallest width (for a triclinic cell: of its reduced
    basis, which is what bounds the periodic images a distance up to r_max can involve)."""
    if dims is None:
        return 12.0
    if kind == TRICLINIC:
        return float(min(K.triclinic_setup(np.asarray(dims, np.float64), 1.0)["widths"]))
    return float(min(dims[:3]))


@st.composite
def positions_and_bins(draw, rng, n, kind, dims, lattice, spacing):
    """(float32 (n, 3) coordinates, nbins, range). Random positions partly outside the cell
    and a range from far below to above its widths; or, with ``lattice``, grid positions and
    bin edges on the grid (many distances exactly on an edge or on r_max)."""
    width = reach(kind, dims)
    if lattice:
        grid = int(2 * width / spacing) if dims is None else None
        if dims is None:
            coords = rng.integers(0, grid, (n, 3)) * spacing
        else:
            cells = np.array([round(L / spacing) for L in dims[:3]])
            coords = rng.integers(-cells // 4, cells + cells // 4, (n, 3)) * spacing
        coords = coords.astype(np.float32)
        step = spacing * draw(st.integers(1, 4))  # bin width: a multiple of the grid
        nbins = draw(st.integers(1, 40))
        n_rmin = draw(st.sampled_from([0, 0, 1, 3]))
        nbins = max(1, min(nbins, int(1.5 * width / step) - n_rmin))
        rng_range = (n_rmin * step, (n_rmin + nbins) * step)  # every edge on the grid
    else:
        if dims is None:
            coords = (rng.random((n, 3)) * 2 * width - 0.3 * width).astype(np.float32)
        else:
            frac = rng.uniform(-0.4, 1.4, (n, 3))
            coords = (frac @ box_matrix(dims)).astype(np.float32)
        nbins = draw(st.integers(1, 50))
        rmax = _f32(draw(st.floats(0.05, 1.8)) * width)
        rmin = draw(st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.5])) * rmax
        rng_range = (float(rmin), float(rmax))
    return coords, nbins, rng_range


@st.composite
def frames(draw):
    lattice = draw(st.booleans())
    spacing = 0.25
    kind, dims = draw(boxes(lattice=lattice, spacing=spacing))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_species = draw(st.integers(1, 3))
    sizes = [draw(st.sampled_from([0, 1, 2, 3, 7, 20, 40])) for _ in range(n_species)]
    n = int(sum(sizes))

    coords, nbins, rng_range = draw(positions_and_bins(rng, n, kind, dims, lattice, spacing))

    # duplicate atoms, within and across species
    if n >= 2 and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            coords[rng.integers(n)] = coords[rng.integers(n)]
    # a pair exactly r_max apart along an axis, and one exactly on an inner edge
    if n >= 4 and not lattice and draw(st.booleans()):
        edges = reference_edges(nbins, rng_range)
        coords[1] = coords[0] + np.float32([edges[-1], 0, 0])
        coords[3] = coords[2] + np.float32([0, edges[len(edges) // 2], 0])

    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pairs = [(a, b) for a in range(n_species) for b in range(a, n_species)]
    if n_species > 1 and draw(st.booleans()):
        pairs.append((n_species - 1, 0))  # the reversed order gives the same row
    labels = None
    if draw(st.booleans()):
        labels = rng.integers(0, draw(st.integers(1, 6)), n).astype(np.int32)
    n_threads = draw(st.integers(1, 3))
    isa = draw(st.sampled_from(ISAS))
    return dict(kind=kind, dims=dims, coords=np.ascontiguousarray(coords), offsets=offsets,
                pairs=np.array(pairs, dtype=np.int32).reshape(-1, 2),
                edges=reference_edges(nbins, rng_range), labels=labels, n_threads=n_threads,
                isa=isa)


@st.composite
def site_frames(draw):
    """One frame for the site-site kernel: two groups of 0 to 6 atoms (or one group twice,
    or groups sharing atoms, which gives pairs at distance 0), boxes and ranges as
    :func:`frames`, and pairs exactly at r_max, on an inner edge and at r_min."""
    lattice = draw(st.booleans())
    spacing = 0.25
    kind, dims = draw(boxes(lattice=lattice, spacing=spacing))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n1, n2 = (draw(st.sampled_from([1, 2, 3, 4, 5, 6, 0])) for _ in range(2))
    coords, nbins, (rmin, rmax) = draw(positions_and_bins(rng, n1 + n2, kind, dims, lattice,
                                                          spacing))
    c1, c2 = coords[:n1], coords[n1:]
    groups = draw(st.sampled_from(["distinct", "same", "shared"]))
    if groups == "same":
        c2 = c1.copy()
    elif groups == "shared" and n1 and n2:
        for _ in range(draw(st.integers(1, 3))):
            c2[rng.integers(n2)] = c1[rng.integers(n1)]
    if n1 and len(c2) >= 3 and not lattice and draw(st.booleans()):
        edges = reference_edges(nbins, (rmin, rmax))
        c2[0] = c1[0] + np.float32([rmax, 0, 0])             # dropped by InterRDF_s's rule
        c2[1] = c1[0] + np.float32([0, edges[nbins // 2], 0])  # an inner edge
        c2[2] = c1[0] + np.float32([0, 0, rmin])             # r_min
    return dict(kind=kind, dims=dims, coords1=np.ascontiguousarray(c1, dtype=np.float32),
                coords2=np.ascontiguousarray(c2, dtype=np.float32), rmin=float(rmin),
                rmax=float(rmax), nbins=nbins, n_threads=draw(st.integers(1, 3)))


# --------------------------------------------------------------------------------------
# Reference and kernel calls
# --------------------------------------------------------------------------------------


def reference(frame, tol=0.0):
    """Per species pair: float64 counts and the distances of the counted pairs (up to
    r_max + 2 tol, the ones single precision could bring into range)."""
    coords, offsets, edges, dims = frame["coords"], frame["offsets"], frame["edges"], frame["dims"]
    labels = frame["labels"]
    scaled = frame["kind"] == ORTHO_SCALED
    rows, dists = [], []
    for a, b in frame["pairs"]:
        sa, sb = slice(offsets[a], offsets[a + 1]), slice(offsets[b], offsets[b + 1])
        pa, pb = coords[sa], coords[sb]
        d = pair_distances(pa, pb, dims, rmax=edges[-1] + 4 * tol + 1e-6,
                           mda_ortho_bruteforce=scaled)
        mask = pair_mask(len(pa), len(pb), labels1=None if labels is None else labels[sa],
                         labels2=None if labels is None else labels[sb])
        dist = d[mask]
        rows.append(np.histogram(dist, bins=edges)[0].astype(np.int64))
        dists.append(dist[dist <= edges[-1] + 4 * tol + 1e-6])
    return np.array(rows).reshape(len(frame["pairs"]), -1), dists


def box_arg(frame):
    if frame["kind"] == NO_BOX:
        return None
    return np.ascontiguousarray(box_matrix(frame["dims"]), dtype=np.float64)


def cpu_counts(frame, double, method="allpairs", k=2, order="rowmajor"):
    h = K.CpuHistogrammer(frame["n_threads"], frame["isa"], method, k, order)
    assert h.isa == frame["isa"]
    out = np.zeros((len(frame["pairs"]), len(frame["edges"]) - 1), dtype=np.uint64)
    h.accumulate(frame["coords"], frame["offsets"], frame["pairs"], frame["edges"],
                 frame["kind"], box_arg(frame), frame["labels"], out, double)
    if method == "cells":
        assert h.last_method == "cells"
    assert not h._overfull
    return out.astype(np.int64)


def gpu_counts(frame, double, method="allpairs", kernel="auto", double_filter=1.0):
    from mdakit_fastrdf.engine import _fastrdf_cuda

    h = _fastrdf_cuda.CudaHistogrammer(0, kernel, 0, True, method, 1, "rowmajor")
    if hasattr(h, "_double_filter"):
        h._double_filter = double_filter  # 0: every pair of a double frame in double
    out = np.zeros((len(frame["pairs"]), len(frame["edges"]) - 1), dtype=np.uint64)
    h.accumulate(frame["coords"], frame["offsets"], frame["pairs"], frame["edges"],
                 frame["kind"], box_arg(frame), frame["labels"], out, double)
    h.synchronize()
    return out.astype(np.int64)


def check_frame(frame, runs):
    """Double runs equal the reference; single runs differ only through near-edge pairs
    and equal each other. ``runs``: {name: (double counts, single counts)}."""
    tol = float32_distance_tolerance(frame["dims"], frame["coords"], frame["edges"][-1])
    ref, dists = reference(frame, tol)
    for name, (dbl, sgl) in runs.items():
        np.testing.assert_array_equal(dbl, ref, err_msg=f"{name}, double precision")
        for row, (a, b) in enumerate(frame["pairs"]):
            assert_only_near_edge_pairs_moved(sgl[row], ref[row], dists[row], frame["edges"],
                                              tol, context=f"{name}, single, pair {(a, b)}")
    singles = list(runs.items())
    for name, (_, sgl) in singles[1:]:
        np.testing.assert_array_equal(sgl, singles[0][1][1],
                                      err_msg=f"{name} vs {singles[0][0]}, single precision")


# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------


@settings(max_examples=N_EXAMPLES or examples(300), **PROPERTY_SETTINGS)
@given(frames())
def test_cpu_paths_equal_float64_bruteforce(frame):
    """CPU all pairs and every cell-list variant, in the drawn SIMD variant, against the
    float64 brute force."""
    isa = frame["isa"]
    runs = {f"allpairs {isa}": (cpu_counts(frame, True), cpu_counts(frame, False))}
    for k, order in CELL_PATHS:
        runs[f"cells k={k} {order} {isa}"] = (cpu_counts(frame, True, "cells", k, order),
                                              cpu_counts(frame, False, "cells", k, order))
    check_frame(frame, runs)


def site_counts(frame, double, base):
    """The site-site kernel (what InterRDF_s calls per frame) added onto ``base``."""
    out = base.astype(np.float64)
    K.site_histograms(frame["coords1"], frame["coords2"], frame["rmin"], frame["rmax"],
                      frame["nbins"], frame["kind"], box_arg(frame), out, double,
                      frame["n_threads"])
    counts = out - base
    assert np.array_equal(counts, np.round(counts))
    return counts.astype(np.int64)


@settings(max_examples=N_EXAMPLES or examples(200), **PROPERTY_SETTINGS)
@given(site_frames())
def test_site_kernel_equals_float64_bruteforce(frame):
    """InterRDF_s's site-site kernel against the float64 brute force with InterRDF_s's
    binning rule: equal counts in double precision; in single precision a pair may only
    have crossed an edge of that rule (rmin - w, rmin + w, rmin + 2w, ..., rmax for bin
    width w: bin 0 holds -1 < (r - rmin) / w < 1) that its float64 distance lies within
    float32 rounding of. The kernel adds onto the histograms it is given."""
    c1, c2, nbins = frame["coords1"], frame["coords2"], frame["nbins"]
    rmin, rmax = frame["rmin"], frame["rmax"]
    coords = np.concatenate([c1, c2]) if len(c1) + len(c2) else None
    tol = float32_distance_tolerance(frame["dims"], coords, rmax)
    ref, dist = site_counts_reference(c1, c2, frame["dims"], rmin, rmax, nbins,
                                      mda_ortho_bruteforce=frame["kind"] == ORTHO_SCALED,
                                      return_distances=True, reach=rmax + 4 * tol + 1e-6)
    base = np.random.default_rng(0).integers(0, 3, ref.shape)
    np.testing.assert_array_equal(site_counts(frame, True, base), ref, err_msg="double precision")
    sgl = site_counts(frame, False, base)
    w = (rmax - rmin) / nbins
    rule_edges = np.concatenate([[rmin - w], rmin + w * np.arange(1, nbins + 1)])
    rule_edges[-1] = rmax
    for i, j in zip(*np.nonzero((sgl != ref).any(axis=2))):
        assert_only_near_edge_pairs_moved(sgl[i, j], ref[i, j], dist[i, j:j + 1], rule_edges,
                                          tol, context=f"single precision, sites {(i, j)}")


@pytest.mark.gpu
@requires_gpu
@settings(max_examples=N_EXAMPLES or examples(60), **PROPERTY_SETTINGS)
@given(frames())
def test_gpu_paths_equal_float64_bruteforce(frame):
    """CUDA all pairs (shared, packed and global-memory kernels) and cell lists against the
    same reference, and bit for bit equal to the CPU in single precision; double precision
    through the float filter (the default) and all in double."""
    runs = {"cpu allpairs": (cpu_counts(frame, True), cpu_counts(frame, False))}
    for method, kernels in (("allpairs", ("shared", "packed", "global")),
                            ("cells", ("shared", "global"))):
        for kernel in kernels:
            runs[f"gpu {method} {kernel}"] = (gpu_counts(frame, True, method, kernel),
                                              gpu_counts(frame, False, method, kernel))
    runs["gpu allpairs shared, all double"] = (gpu_counts(frame, True, double_filter=0.0),
                                               runs["gpu allpairs shared"][1])
    check_frame(frame, runs)


def test_gpu_marker_skips_cleanly():
    """Without a GPU the GPU property test is skipped, not failed (documented here so that
    a CPU-only CI log shows why)."""
    if GPU_UNAVAILABLE is None:
        pytest.skip("a GPU is present: the GPU property test runs")
    assert isinstance(GPU_UNAVAILABLE, str) and GPU_UNAVAILABLE


# Fixed frames that exercise the checker itself, so a broken check cannot pass silently.


def test_near_edge_checker_rejects_impossible_moves():
    edges = np.array([0.0, 1.0, 2.0, 3.0])
    dist = np.array([0.5, 0.9999999, 1.5, 2.5])
    ref = np.histogram(dist, bins=edges)[0]
    # a count moved across edge 1 (a pair is near it): allowed
    assert_only_near_edge_pairs_moved(ref + [-1, 1, 0], ref, dist, edges, 1e-6)
    # a count moved across edge 2, where no pair is near: rejected
    with pytest.raises(AssertionError):
        assert_only_near_edge_pairs_moved(ref + [0, -1, 1], ref, dist, edges, 1e-6)
    # a count moved two bins: rejected
    with pytest.raises(AssertionError):
        assert_only_near_edge_pairs_moved(ref + [-1, 0, 1], ref, dist, edges, 1e-6)
    # a pair lost at r_max when one lies just below it: allowed; an extra one: rejected
    dist2 = np.array([0.5, 2.9999999])
    ref2 = np.histogram(dist2, bins=edges)[0]
    assert_only_near_edge_pairs_moved(ref2 + [0, 0, -1], ref2, dist2, edges, 1e-6)
    with pytest.raises(AssertionError):
        assert_only_near_edge_pairs_moved(ref2 + [0, 0, 1], ref2, dist2, edges, 1e-6)
