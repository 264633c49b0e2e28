"""Direct tests of the compiled CPU module ``mdakit_fastrdf.engine._fastrdf_cpu``.

The binding API (csrc/python/bindings.cpp)::

    h = CpuHistogrammer(n_threads=0, isa="")
    h.accumulate(coords (N,3) float32, offsets (S+1,) int64, pairs (P,2) int32,
                 edges (nbins+1,) float64, box_kind 0|1|2, box None|(3,3) float64 rows,
                 labels None|(N,) int32, out (P,nbins) uint64 [accumulated into],
                 double_precision bool)
    wrap_positions(coords, box float32 (3,3), triclinic)
    triclinic_setup(box float64 (3,3), rmax) -> dict(basis, reciprocal, widths, images)

Checked here: per-species-pair histograms against the brute force, exclusion labels,
exact uint64 accumulation over many calls (including near 2**32 and 2**63), bit-identical
results for any thread count and every SIMD variant, argument validation, and the
host-side helpers (wrapping identical to MDAnalysis, reduced triclinic basis).
"""

import os

import numpy as np
import pytest

from conftest import box_matrix, brute_force_counts, random_positions_in_box, reference_edges

K = pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")
if not hasattr(K, "CpuHistogrammer"):  # pragma: no cover
    pytest.skip("the compiled module has no CpuHistogrammer", allow_module_level=True)

NO_BOX, ORTHO, TRICLINIC = 0, 1, 2

DIMS = {
    NO_BOX: None,
    ORTHO: (26.0, 28.0, 30.0, 90.0, 90.0, 90.0),
    TRICLINIC: (30.0, 30.0, 30.0, 35.0, 40.0, 45.0),
}


def _box_arg(kind):
    return None if kind == NO_BOX else np.ascontiguousarray(box_matrix(DIMS[kind]))


def _species_coords(rng, sizes, kind):
    n = int(sum(sizes))
    if kind == NO_BOX:
        coords = (rng.random((n, 3)) * 25.0).astype(np.float32)
    else:
        coords = random_positions_in_box(rng, n, DIMS[kind])[0]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return np.ascontiguousarray(coords), offsets


def _accumulate(h, coords, offsets, pairs, edges, kind, labels=None, double=True, out=None):
    pairs = np.ascontiguousarray(pairs, dtype=np.int32).reshape(-1, 2)
    if out is None:
        out = np.zeros((len(pairs), len(edges) - 1), dtype=np.uint64)
    h.accumulate(coords, offsets, pairs, np.ascontiguousarray(edges, dtype=np.float64), kind,
                 _box_arg(kind), labels, out, double)
    return out


# ---------------------------------------------------------------------------------------
# Correctness of the per-pair histograms
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [NO_BOX, ORTHO, TRICLINIC])
def test_species_pairs_match_bruteforce(kind):
    """Every requested species pair gets its own histogram row, equal (double precision)
    to the brute force over all its ordered pairs. A pair (s, s) counts every ordered pair
    plus each atom with itself; (a, b) and (b, a) give the same row; an empty species gives
    zeros; a one-atom species works. rmax is above half the smallest width of the skewed
    triclinic box (multi-image path)."""
    rng = np.random.default_rng(41)
    sizes = [70, 130, 1, 0]
    coords, offsets = _species_coords(rng, sizes, kind)
    pairs = [(0, 0), (0, 1), (1, 0), (1, 2), (2, 2), (0, 3), (3, 3), (1, 1)]
    edges = reference_edges(40, (0.0, 12.0))
    out = _accumulate(K.CpuHistogrammer(1), coords, offsets, pairs, edges, kind)
    dims = DIMS[kind]
    for row, (a, b) in zip(out, pairs):
        pa = coords[offsets[a]:offsets[a + 1]]
        pb = coords[offsets[b]:offsets[b + 1]]
        ref = brute_force_counts(pa, pb, dims, edges, mdanalysis_path=False) if len(pa) and len(pb) else 0
        np.testing.assert_array_equal(row.astype(np.int64), ref, err_msg=f"pair {(a, b)}")


def _float32_distances(c1, c2, kind, rmax, dims=None):
    """The single-precision distances of geometry.hpp, step by step in NumPy float32 (each
    operation correctly rounded, none fused): d = xj - xi; minus the shift s (orthorhombic
    l * rint(d * inv), triclinic sum_k rint(f_k . d) a_k over the reduced basis), d' = d - s;
    r2 = (dx^2 + dy^2) + dz^2, the least over the triclinic extra images; r = sqrt(r2).
    dims: the box (default DIMS[kind])."""
    f32 = np.float32
    dims = DIMS[kind] if dims is None else dims
    xi, xj = c1[:, None, :], c2[None, :, :]
    d = xj - xi
    images = np.zeros((0, 3), f32)
    if kind == ORTHO:
        lengths = np.diagonal(box_matrix(dims)).copy()  # float32 lengths, as the kernel's box
        l32, inv32 = lengths.astype(f32), (1.0 / lengths).astype(f32)
        d = d - l32 * np.rint(d * inv32)  # rint: to nearest, ties to even, as nint()
    elif kind == TRICLINIC:
        # the reduced basis a (rows), its reciprocal f and the extra images, from the host
        setup = K.triclinic_setup(np.ascontiguousarray(box_matrix(dims)), float(rmax))
        a, f = (np.asarray(setup[k], np.float64).astype(f32) for k in ("basis", "reciprocal"))
        images = np.asarray(setup["images"], np.float64).astype(f32).reshape(-1, 3)
        n = [np.rint((f[k, 0] * d[..., 0] + f[k, 1] * d[..., 1]) + f[k, 2] * d[..., 2])
             for k in range(3)]
        d = d - np.stack([(n[0] * a[0, c] + n[1] * a[1, c]) + n[2] * a[2, c] for c in range(3)], -1)
    assert d.dtype == f32

    def norm2(v):
        return (v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1]) + v[..., 2] * v[..., 2]

    r2 = norm2(d)
    for image in images:  # the least over the extra images, in their order
        r2 = np.minimum(r2, norm2(d - image))
    return np.sqrt(r2)


def _float32_replica(c1, c2, kind, edges):
    """The single-precision histogram of geometry.hpp: the distances of _float32_distances,
    bin trunc((r - rmin) * norm) in float32, clamped to the last bin, for rmin <= r <= rmax."""
    f32 = np.float32
    r = _float32_distances(c1, c2, kind, edges[-1])
    nbins = len(edges) - 1
    rmin, rmax = f32(edges[0]), f32(edges[-1])
    norm = f32(nbins / (float(edges[-1]) - float(edges[0])))
    inside = (r >= rmin) & (r <= rmax)
    k = np.minimum(np.trunc((r[inside] - rmin) * norm).astype(np.int64), nbins - 1)
    return np.bincount(k, minlength=nbins)


@pytest.mark.parametrize("kind", [NO_BOX, ORTHO, TRICLINIC])
@pytest.mark.parametrize("rng_range", [(0.0, 14.0), (1.5, 40.0)])
def test_single_precision_is_the_documented_float32_arithmetic(kind, rng_range):
    """Single precision is defined by its float32 arithmetic (geometry.hpp), not by a
    tolerance: the CPU kernel (all pairs and cell lists, every SIMD variant) equals a NumPy
    float32 replica of it bit for bit, with a third of the atoms moved by up to two box
    lengths (shifts other than 0) and a range past half the box (the triclinic extra
    images). The pair (1, 0) gives the same row: the arithmetic is symmetric in i and j."""
    rng = np.random.default_rng(7)
    sizes = [900, 700]
    coords, offsets = _species_coords(rng, sizes, kind)
    if kind != NO_BOX:
        moved = rng.random(len(coords)) < 0.3
        steps = rng.integers(-2, 3, (int(moved.sum()), 3)) @ box_matrix(DIMS[kind])
        coords[moved] = (coords[moved] + steps).astype(np.float32)
    edges = reference_edges(997, rng_range)
    c1, c2 = coords[:sizes[0]], coords[sizes[0]:]
    ref = _float32_replica(c1, c2, kind, edges)
    assert ref.sum() > 0
    for isa in K.usable_variants():
        for method in ("allpairs", "cells"):
            h = K.CpuHistogrammer(2, isa, method, 1, "rowmajor")
            out = _accumulate(h, coords, offsets, [(0, 1), (1, 0)], edges, kind, double=False)
            np.testing.assert_array_equal(out[0].astype(np.int64), ref,
                                          err_msg=f"{isa}, {method}")
            np.testing.assert_array_equal(out[1], out[0], err_msg=f"{isa}, {method}, (1, 0)")


@pytest.mark.parametrize("kind", [NO_BOX, TRICLINIC])
def test_labels_exclude_equal_label_pairs(kind):
    """Pairs whose atoms carry the same label are skipped (self pairs included), both
    within one species and between species."""
    rng = np.random.default_rng(42)
    sizes = [90, 60]
    coords, offsets = _species_coords(rng, sizes, kind)
    labels = rng.integers(0, 25, sum(sizes)).astype(np.int32)
    edges = reference_edges(30, (0.0, 10.0))
    out = _accumulate(K.CpuHistogrammer(2), coords, offsets, [(0, 0), (0, 1)], edges, kind,
                      labels=labels)
    dims = DIMS[kind]
    p0, p1 = coords[:90], coords[90:]
    l0, l1 = labels[:90], labels[90:]
    np.testing.assert_array_equal(out[0].astype(np.int64),
                                  brute_force_counts(p0, p0, dims, edges, labels1=l0, labels2=l0, mdanalysis_path=False))
    np.testing.assert_array_equal(out[1].astype(np.int64),
                                  brute_force_counts(p0, p1, dims, edges, labels1=l0, labels2=l1, mdanalysis_path=False))


# ---------------------------------------------------------------------------------------
# Exact integer accumulation
# ---------------------------------------------------------------------------------------


def test_out_is_accumulated_into():
    """Each call adds to ``out``; it never overwrites."""
    rng = np.random.default_rng(43)
    coords, offsets = _species_coords(rng, [100, 100], ORTHO)
    edges = reference_edges(20, (0.0, 9.0))
    h = K.CpuHistogrammer(2)
    once = _accumulate(h, coords, offsets, [(0, 1)], edges, ORTHO)
    out = once.copy()
    _accumulate(h, coords, offsets, [(0, 1)], edges, ORTHO, out=out)
    np.testing.assert_array_equal(out, 2 * once)


@pytest.mark.parametrize("start", [0, 2**32 - 7, 2**33 + 1, 2**63 + 12345],
                         ids=["zero", "2^32-7", "2^33+1", "2^63+12345"])
def test_many_calls_keep_exact_uint64_sums(start):
    """Overflow safety: a histogram accumulated over many calls holds exact uint64 sums,
    also when the totals cross 2**32 (a 32-bit accumulator would wrap) or sit above 2**63
    (a signed or float64 accumulator would lose counts)."""
    n0, n1 = 300, 400
    coords = np.zeros((n0 + n1, 3), dtype=np.float32)
    # species 1 sits at four distances from species 0 (which is at the origin), all well
    # inside bins: 0.55 (bin 1), 1.25 (bin 2), 3.75 (bin 7), 4.95 (bin 9)
    dists = np.array([0.55, 1.25, 3.75, 4.95], dtype=np.float32)
    coords[n0:, 0] = np.repeat(dists, n1 // 4)
    offsets = np.array([0, n0, n0 + n1], dtype=np.int64)
    edges = reference_edges(10, (0.0, 5.0))
    per_call = np.zeros(10, dtype=object)
    for b in (1, 2, 7, 9):
        per_call[b] = n0 * (n1 // 4)
    per_call[0] = 0
    out = np.full((1, 10), start, dtype=np.uint64)
    h = K.CpuHistogrammer(2)
    n_calls = 60
    for _ in range(n_calls):
        for double in (False, True):
            _accumulate(h, coords, offsets, [(0, 1)], edges, NO_BOX, double=double, out=out)
    expected = [start + 2 * n_calls * int(c) for c in per_call]
    assert [int(v) for v in out[0]] == expected


@pytest.mark.skipif(not os.environ.get("FASTRDF_SLOW_TESTS"),
                    reason="slow (~20 s): set FASTRDF_SLOW_TESTS=1 to run")
@pytest.mark.slow
def test_single_call_beyond_uint32_per_thread():
    """One call in which one thread bins more than 2**32 pairs, forcing the flush of its
    private uint32 histogram in the middle of the call: the counts stay exact."""
    n0 = 66000
    n1 = 66000
    coords = np.zeros((n0 + n1, 3), dtype=np.float32)
    dists = (np.arange(10, dtype=np.float32) + np.float32(0.5)) * np.float32(0.5)
    coords[n0:, 0] = np.repeat(dists, n1 // 10)
    offsets = np.array([0, n0, n0 + n1], dtype=np.int64)
    edges = reference_edges(10, (0.0, 5.0))
    assert n0 * n1 > 2**32
    out = _accumulate(K.CpuHistogrammer(1), coords, offsets, [(0, 1)], edges, NO_BOX,
                      double=False)
    np.testing.assert_array_equal(out[0], np.full(10, n0 * (n1 // 10), dtype=np.uint64))


# ---------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
@pytest.mark.parametrize("kind", [NO_BOX, ORTHO, TRICLINIC])
def test_thread_count_does_not_change_results(kind, double):
    """n_threads=1 and n_threads=2 (and 3, more than the cores) give identical arrays."""
    rng = np.random.default_rng(44)
    coords, offsets = _species_coords(rng, [900, 700, 1], kind)
    edges = reference_edges(64, (0.5, 13.0))
    labels = (np.arange(len(coords)) // 3).astype(np.int32)
    pairs = [(0, 0), (0, 1), (2, 1)]
    results = []
    for n_threads in (1, 2, 3):
        h = K.CpuHistogrammer(n_threads)
        assert h.n_threads in (1, n_threads)  # 1 when built without OpenMP
        a = _accumulate(h, coords, offsets, pairs, edges, kind, double=double)
        b = _accumulate(h, coords, offsets, pairs, edges, kind, labels=labels, double=double)
        results.append((a, b))
    for a, b in results[1:]:
        np.testing.assert_array_equal(a, results[0][0])
        np.testing.assert_array_equal(b, results[0][1])


@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
@pytest.mark.parametrize("kind", [NO_BOX, ORTHO, TRICLINIC])
def test_simd_variants_are_bit_identical(kind, double):
    """Every SIMD variant this CPU can run (baseline, AVX2, AVX-512) gives the same counts,
    in single precision too (no FMA contraction, no fast-math)."""
    variants = list(K.usable_variants())
    if len(variants) < 2:
        pytest.skip(f"only one usable SIMD variant: {variants}")
    rng = np.random.default_rng(45)
    coords, offsets = _species_coords(rng, [800, 650], kind)
    edges = reference_edges(100, (0.0, 14.0))
    outs = {}
    for isa in variants:
        h = K.CpuHistogrammer(2, isa)
        assert h.isa == isa
        outs[isa] = _accumulate(h, coords, offsets, [(0, 0), (0, 1)], edges, kind,
                                double=double)
    for isa in variants[1:]:
        np.testing.assert_array_equal(outs[isa], outs[variants[0]], err_msg=isa)
    if double:
        ref = brute_force_counts(coords[:800], coords[800:], DIMS[kind], edges, mdanalysis_path=False)
        np.testing.assert_array_equal(outs[variants[0]][1].astype(np.int64), ref)


def test_unknown_isa_rejected():
    """Asking for a SIMD variant that is not compiled/usable is an error."""
    with pytest.raises((ValueError, RuntimeError)):
        K.CpuHistogrammer(1, "sse9000")


# ---------------------------------------------------------------------------------------
# Argument validation of the binding
# ---------------------------------------------------------------------------------------


def _valid_args():
    coords = np.zeros((4, 3), dtype=np.float32)
    coords[:, 0] = [0, 1, 2, 3]
    return dict(
        coords=coords,
        offsets=np.array([0, 2, 4], dtype=np.int64),
        pairs=np.array([[0, 1]], dtype=np.int32),
        edges=np.linspace(0.0, 5.0, 6),
        box_kind=0,
        box=None,
        labels=None,
        out=np.zeros((1, 5), dtype=np.uint64),
        double_precision=True,
    )


def test_valid_call():
    args = _valid_args()
    K.CpuHistogrammer(1).accumulate(**args)
    # species 0 at x = 0, 1; species 1 at x = 2, 3: distances 2, 3, 1, 2
    np.testing.assert_array_equal(args["out"][0], [0, 1, 2, 1, 0])


@pytest.mark.parametrize(
    "change, exc",
    [
        (dict(coords=np.zeros((4, 3), dtype=np.float64)), (TypeError, ValueError)),
        (dict(coords=np.zeros((4, 2), dtype=np.float32)), ValueError),
        (dict(offsets=np.array([0, 2, 5], dtype=np.int64)), ValueError),
        (dict(offsets=np.array([0, 3, 2, 4], dtype=np.int64)), ValueError),
        (dict(pairs=np.array([[0, 2]], dtype=np.int32)), ValueError),
        (dict(pairs=np.array([[-1, 0]], dtype=np.int32)), ValueError),
        (dict(edges=np.array([1.0])), ValueError),
        (dict(out=np.zeros((1, 4), dtype=np.uint64)), ValueError),
        (dict(out=np.zeros((1, 5), dtype=np.int64)), (TypeError, ValueError)),
        (dict(labels=np.zeros(3, dtype=np.int32)), ValueError),
        (dict(box_kind=7), ValueError),
        (dict(box_kind=1, box=np.diag([10.0, -1.0, 10.0])), ValueError),
        (dict(box_kind=2, box=np.zeros((3, 3))), ValueError),
    ],
    ids=["coords-f64", "coords-shape", "offsets-end", "offsets-decreasing", "pairs-range",
         "pairs-negative", "edges-short", "out-shape", "out-dtype", "labels-len",
         "box-kind", "box-negative", "box-degenerate"],
)
def test_invalid_arguments(change, exc):
    """Malformed inputs are rejected with an exception, never read out of bounds."""
    args = _valid_args()
    args.update(change)
    with pytest.raises(exc):
        K.CpuHistogrammer(1).accumulate(**args)


def test_nan_coordinates_rejected():
    """Non-finite coordinates are rejected, with a message naming them."""
    args = _valid_args()
    args["coords"][2, 1] = np.nan
    with pytest.raises(ValueError, match="(?i)coordinates|nan"):
        K.CpuHistogrammer(1).accumulate(**args)
    args = _valid_args()
    args["coords"][0, 0] = np.inf
    with pytest.raises(ValueError, match="(?i)coordinates|nan|infinite"):
        K.CpuHistogrammer(1).accumulate(**args)


def test_negative_threads_rejected():
    with pytest.raises(ValueError, match="n_threads"):
        K.CpuHistogrammer(-1)


# ---------------------------------------------------------------------------------------
# Host-side helpers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [(25.0, 27.0, 29.0, 90.0, 90.0, 90.0),
                                  (30.0, 30.0, 30.0, 60.0, 60.0, 90.0),
                                  (40.0, 35.0, 30.0, 70.0, 80.0, 100.0),
                                  (30.0, 30.0, 30.0, 35.0, 40.0, 45.0)])
def test_wrap_positions_identical_to_mdanalysis(dims):
    """Wrapping into the primary cell is bit-identical to MDAnalysis' apply_PBC (float32),
    for positions many box lengths away, negative, and exactly on cell faces."""
    from MDAnalysis.lib.distances import apply_PBC

    rng = np.random.default_rng(46)
    b32 = box_matrix(dims).astype(np.float32)
    frac = np.concatenate([rng.random((3000, 3)) * 9 - 4,
                           rng.integers(-3, 4, (200, 3)).astype(float)])
    pos = np.ascontiguousarray((frac @ b32.astype(np.float64)).astype(np.float32))
    ref = apply_PBC(pos, np.asarray(dims, dtype=np.float32))
    mine = pos.copy()
    triclinic = not np.all(np.asarray(dims[3:]) == 90.0)
    K.wrap_positions(mine, np.ascontiguousarray(b32), triclinic)
    np.testing.assert_array_equal(mine, ref)


@pytest.mark.parametrize("dims", [(30.0, 30.0, 30.0, 35.0, 40.0, 45.0),
                                  (40.0, 35.0, 30.0, 70.0, 80.0, 100.0),
                                  (80.017006, 80.017006, 80.017006, 60.0, 60.0, 90.0)])
def test_triclinic_setup_reduced_basis(dims):
    """The reduced basis spans the same lattice (integer, unimodular change of basis), the
    reciprocal vectors are its dual, no extra images are needed below half the smallest
    reduced width, and some are listed well above it."""
    box = np.ascontiguousarray(box_matrix(dims))
    s = K.triclinic_setup(box, 1.0)
    basis, recip = np.asarray(s["basis"]), np.asarray(s["reciprocal"])
    m = basis @ np.linalg.inv(box)
    np.testing.assert_allclose(m, np.rint(m), atol=1e-9)
    assert abs(round(np.linalg.det(np.rint(m)))) == 1
    np.testing.assert_allclose(recip @ basis.T, np.eye(3), atol=1e-12)
    widths = np.asarray(s["widths"], dtype=float)
    assert np.asarray(s["images"]).size == 0
    half = 0.49 * widths.min()
    assert np.asarray(K.triclinic_setup(box, half)["images"]).size == 0
    big = K.triclinic_setup(box, 1.2 * widths.max())
    imgs = np.asarray(big["images"]).reshape(-1, 3)
    assert len(imgs) > 0
    # every listed image is a lattice vector (integer combination of the box vectors)
    n = imgs @ np.linalg.inv(box)
    np.testing.assert_allclose(n, np.rint(n), atol=1e-9)
