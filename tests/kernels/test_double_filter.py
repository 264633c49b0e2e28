"""Double precision through the float filter (``double_filter_delta`` in kernel_api.hpp).

The CPU kernel computes every pair in float32 and recomputes in float64 only the pairs whose
float bin coordinate lies within a proven bound of a bin edge (or of the range's ends). The
counts must be those of the all-double kernel, which reproduces InterRDF's float64
distances and numpy's binning. Checked here:

* the filtered and the all-double kernel give the same histograms in every box form, for
  all pairs and cell lists, with labels, rmin > 0 and fine bins, in every SIMD variant;
* pairs placed on the float64 bin edges (and one or two float32 steps either side), where
  float32 binning gets the wrong bin, agree with a float64 NumPy brute force;
* the bound itself, against the distances of a NumPy float32 replica of the kernel's
  arithmetic and float64 reference distances, on frames with unwrapped atoms (shifts other
  than 0), half-box ties and the triclinic extra images: every pair's float coordinate lies
  within half the bound (the kernel doubles its estimate) of the exact one.
"""

import numpy as np
import pytest

from conftest import box_matrix, brute_force_counts, pair_distances, random_positions_in_box, reference_edges
from test_kernel import _float32_distances

K = pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")
if not hasattr(K, "CpuHistogrammer") or not hasattr(K.CpuHistogrammer, "last_filter"):  # pragma: no cover
    pytest.skip("the compiled module has no float filter", allow_module_level=True)

NO_BOX, ORTHO, TRICLINIC, ORTHO_SCALED = 0, 1, 2, 3
DIMS = {
    NO_BOX: None,
    ORTHO: (26.0, 28.0, 30.0, 90.0, 90.0, 90.0),
    ORTHO_SCALED: (26.0, 28.0, 30.0, 90.0, 90.0, 90.0),
    TRICLINIC: (30.0, 30.0, 30.0, 35.0, 40.0, 45.0),
}
KINDS = [NO_BOX, ORTHO, ORTHO_SCALED, TRICLINIC]


def _run(coords, offsets, pairs, edges, kind, *, dims=None, labels=None, scale=1.0,
         isa="", method="auto", double=True):
    """One frame (double precision by default); returns (counts, (bound, settled pairs))."""
    dims = DIMS[kind] if dims is None else dims
    h = K.CpuHistogrammer(2, isa, method, 0, "rowmajor")
    h._double_filter = scale
    pairs = np.ascontiguousarray(pairs, dtype=np.int32).reshape(-1, 2)
    out = np.zeros((len(pairs), len(edges) - 1), dtype=np.uint64)
    box = None if kind == NO_BOX else np.ascontiguousarray(box_matrix(dims))
    h.accumulate(np.ascontiguousarray(coords, dtype=np.float32), np.asarray(offsets, np.int64),
                 pairs, np.ascontiguousarray(edges, dtype=np.float64), kind, box, labels, out, double)
    return out, h.last_filter


def _frame(rng, n, kind, moved=0.3):
    """n atoms in the box of kind (a 25 Å cube without one), a fraction moved by up to two
    box vectors (shifts other than 0)."""
    if kind == NO_BOX:
        return (rng.random((n, 3)) * 25.0).astype(np.float32)
    coords = random_positions_in_box(rng, n, DIMS[kind])[0]
    m = rng.random(n) < moved
    steps = rng.integers(-2, 3, (int(m.sum()), 3)) @ box_matrix(DIMS[kind])
    coords[m] = (coords[m] + steps).astype(np.float32)
    return coords


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nbins, rng_range, moved", [(75, (0.0, 15.0), 0.3), (4000, (0.5, 14.0), 0.0),
                                                     (1000, (2.0, 40.0), 0.3)])
def test_filter_equals_all_double(kind, nbins, rng_range, moved):
    """The filtered kernel (the default) and the all-double kernel count the same, for all
    pairs and cell lists, with and without labels, in every SIMD variant; the filter ran (a
    bound >= 0) and sent some pairs to double. (At 4000 bins over 13.5 Å the bound of a
    frame with unwrapped atoms is too wide for the filter in a triclinic box, so that frame
    is wrapped.)"""
    rng = np.random.default_rng(nbins + 10 * kind)
    sizes = [1200, 1500]
    coords = _frame(rng, sum(sizes), kind, moved)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    pairs = [(0, 1), (1, 1)]
    edges = reference_edges(nbins, rng_range)
    labels = rng.integers(0, 300, sum(sizes)).astype(np.int32)
    ref, (bound, _) = _run(coords, offsets, pairs, edges, kind, scale=0.0)
    assert bound < 0
    assert ref.sum() > 0
    for lab in (None, labels):
        ref = _run(coords, offsets, pairs, edges, kind, labels=lab, scale=0.0)[0]
        for isa in K.usable_variants():
            for method in ("allpairs", "cells"):
                out, (bound, settled) = _run(coords, offsets, pairs, edges, kind, labels=lab,
                                             isa=isa, method=method)
                assert 0 < bound < 0.1, (isa, method)
                assert settled > 0, (isa, method)
                np.testing.assert_array_equal(out, ref, err_msg=f"{isa}, {method}, labels {lab is not None}")


def _edge_frame(edges):
    """Pairs along x whose float64 distance lies on a bin edge, or one or two float32 steps
    either side: atom 0 at the origin, the others at (x, 0, 0) for x around every edge (the
    float32 differences are exact, so the distances are the x)."""
    e32 = edges.astype(np.float32)
    up, down = np.float32(np.inf), np.float32(-np.inf)
    xs = np.concatenate([e32, np.nextafter(e32, up), np.nextafter(e32, down),
                         np.nextafter(np.nextafter(e32, up), up),
                         np.nextafter(np.nextafter(e32, down), down)])
    xs = xs[xs > 0]
    pos = np.zeros((len(xs) + 1, 3), np.float32)
    pos[1:, 0] = xs
    return pos


@pytest.mark.parametrize("kind", KINDS)
def test_pairs_on_the_edges(kind):
    """Pairs on the float64 edges: the default kernel equals the float64 NumPy brute force,
    for all pairs and cell lists; float32 binning (single precision) differs on the same
    frame, so the frame tells the two arithmetics apart."""
    edges = reference_edges(1000, (0.0, 12.0))
    coords = _edge_frame(edges)
    offsets = [0, 1, len(coords)]
    ref = brute_force_counts(coords[:1], coords[1:], DIMS[kind], edges,
                             mdanalysis_path=kind == ORTHO_SCALED)
    assert ref.sum() > 3 * 1000
    for method in ("allpairs", "cells"):
        out, (bound, settled) = _run(coords, offsets, [(0, 1)], edges, kind, method=method)
        assert bound > 0 and settled > 0
        np.testing.assert_array_equal(out[0].astype(np.int64), ref, err_msg=method)
        single = _run(coords, offsets, [(0, 1)], edges, kind, method=method, double=False)[0]
        assert (single[0].astype(np.int64) != ref).any(), method


def _replica_error(coords, sizes, kind, edges, dims):
    """Largest |f32 - f64| over the pairs that matter (f32 within [-1/2, nbins + 1/2]), with
    f32 the kernel's float bin coordinate from the NumPy float32 replica of its distances and
    f64 the exact coordinate of float64 reference distances."""
    c1, c2 = coords[:sizes[0]], coords[sizes[0]:]
    nbins = len(edges) - 1
    rmin, rmax = float(edges[0]), float(edges[-1])
    f32 = np.float32
    r32 = _float32_distances(c1, c2, ORTHO if kind == ORTHO_SCALED else kind, rmax, dims)
    if kind == ORTHO_SCALED:  # MDAnalysis's form: no replica here, only kinds 0-2
        raise ValueError("kind")
    x32 = (r32 - f32(rmin)) * f32(nbins / (rmax - rmin))
    r64 = pair_distances(c1, c2, dims, rmax=rmax + 2.0 * (rmax - rmin) / nbins)
    x64 = (r64 - rmin) * (nbins / (rmax - rmin))
    relevant = (x32 >= -0.5) & (x32 <= nbins + 0.5)
    assert relevant.sum() > 100
    return float(np.abs(x32[relevant].astype(np.float64) - x64[relevant]).max())


@pytest.mark.parametrize("kind, dims", [
    (NO_BOX, None),
    (ORTHO, (26.0, 28.0, 30.0, 90.0, 90.0, 90.0)),
    (ORTHO, (211.3, 97.1, 150.9, 90.0, 90.0, 90.0)),
    (TRICLINIC, (30.0, 30.0, 30.0, 35.0, 40.0, 45.0)),
    (TRICLINIC, (80.0, 80.0, 80.0, 60.0, 60.0, 90.0)),
    (TRICLINIC, (51.0, 47.0, 63.0, 70.53, 109.47, 70.53)),
])
@pytest.mark.parametrize("unwrapped", [False, True])
def test_bound_covers_the_float_error(kind, dims, unwrapped):
    """The kernel's bound (halved: it doubles its estimate) covers the float32 error of every
    pair's bin coordinate, from a NumPy float32 replica of the kernel's arithmetic against
    float64 reference distances; fine bins up to half the smallest box width (rmax past the
    single-image limit brings in the triclinic extra images), atoms unwrapped by up to three
    box vectors, and pairs at half a box length along an axis (ties of the image)."""
    rng = np.random.default_rng(5)
    n1, n2 = 400, 900
    if kind == NO_BOX:
        coords = (rng.random((n1 + n2, 3)) * 60.0).astype(np.float32)
        rmax = 100.0
    else:
        coords = random_positions_in_box(rng, n1 + n2, dims)[0]
        b = box_matrix(dims)
        # ties: atoms half a box vector from another, along each vector
        half = (coords[:30, None, :] + 0.5 * b[None, :, :]).reshape(-1, 3).astype(np.float32)
        coords[n1:n1 + len(half)] = half
        if unwrapped:
            m = rng.random(n1 + n2) < 0.5
            steps = rng.integers(-3, 4, (int(m.sum()), 3)) @ b
            coords[m] = (coords[m] + steps).astype(np.float32)
        rmax = 0.6 * min(dims[:3])
    edges = reference_edges(300 if unwrapped else 2000, (0.0, rmax))  # the bound grows with the extent
    offsets = [0, n1, n1 + n2]
    bound = _run(coords, offsets, [(0, 1)], edges, kind, dims=dims)[1][0]
    assert 0 < bound < 0.1
    err = _replica_error(coords, (n1, n2), kind, edges, dims)
    assert err <= bound / 2, f"float error {err:.3g} bins above the bound {bound / 2:.3g}"


# -- the slab (LateralRDF's slab=h): the float kernels flag the images near the slab's edge --
ORTHO_SLAB, TRICLINIC_SLAB = 4, 5
SLAB_DIMS = {ORTHO_SLAB: (26.0, 28.0, 30.0, 90.0, 90.0, 90.0),
             TRICLINIC_SLAB: (27.0, 27.0, 30.0, 90.0, 90.0, 120.0)}


def _slab_frame(rng, kind, h, n_edge=120, n_free=150, moved=0.3):
    """Atoms of the box of `kind`: `n_free` at random (a fraction moved by up to one box
    vectors), and `n_edge` pairs whose float32 z difference is h exactly or up to three float
    steps either side (|dz| = h is in the slab, one step more is out), close in the plane."""
    from MDAnalysis.lib.mdamath import triclinic_vectors

    vectors = triclinic_vectors(np.asarray(SLAB_DIMS[kind], np.float32)).astype(np.float64)
    free = (rng.random((n_free, 3)) @ vectors).astype(np.float32)
    m = rng.random(n_free) < moved
    free[m] = (free[m] + rng.integers(-1, 2, (int(m.sum()), 3)) @ vectors).astype(np.float32)
    a = np.empty((n_edge, 3), np.float32)
    a[:, :2] = rng.uniform(2.0, 20.0, (n_edge, 2))
    a[:, 2] = rng.uniform(8.0, 15.9, n_edge).astype(np.float32)  # z in [8, 16): steps 2^-20
    b = a.copy()
    b[:, :2] += rng.uniform(-3.0, 3.0, (n_edge, 2)).astype(np.float32)
    sign = np.where(rng.random(n_edge) < 0.5, -1.0, 1.0).astype(np.float32)
    z = (a[:, 2] + sign * np.float32(h)).astype(np.float32)  # exact: h is a multiple of 2^-20
    steps = rng.integers(-3, 4, n_edge)
    for k in range(n_edge):
        for _ in range(abs(int(steps[k]))):
            z[k] = np.nextafter(z[k], np.float32(np.inf) if steps[k] * sign[k] > 0 else -np.inf)
    b[:, 2] = z
    assert np.any(np.abs((b[:, 2] - a[:, 2]).astype(np.float64)) == h)
    coords = np.concatenate([free, a, b]).astype(np.float32)
    box = np.zeros((4, 3))
    box[:3] = triclinic_vectors(np.asarray(SLAB_DIMS[kind], np.float32))
    return coords, box


@pytest.mark.parametrize("kind", [ORTHO_SLAB, TRICLINIC_SLAB])
@pytest.mark.parametrize("w, distance", [(0.0, "lateral"), (1.0, "3d")])
@pytest.mark.parametrize("method", ["allpairs", "cells"])
@pytest.mark.parametrize("h, rng_range, nbins", [(2.0, (0.0, 9.0), 90), (0.5, (0.0, 12.0), 400)])
def test_slab_edge_pairs(kind, w, distance, method, h, rng_range, nbins):
    """The slab's test |dz| <= h in double precision through the float filter: pairs whose
    float32 z separation is h exactly or a few float steps either side, and random pairs
    (some of them unwrapped), give the counts of a float64 NumPy brute force (test_slab's
    reference: every lattice image, the slab applied per image) and of the all-double kernel;
    the filter ran (a bound >= 0) and recomputed pairs in double."""
    from test_slab import slab_reference

    rng = np.random.default_rng(int(h * 10) + kind)
    coords, box = _slab_frame(rng, kind, h)
    box[3, :2] = (h, w)
    edges = reference_edges(nbins, rng_range)
    n = len(coords)
    ref = slab_reference(coords, coords, SLAB_DIMS[kind], edges, h, 2, distance, same=True)

    def run(scale, edges=edges):
        hist = K.CpuHistogrammer(2, "", method, 0, "rowmajor")
        hist._double_filter = scale
        out = np.zeros((1, len(edges) - 1), np.uint64)
        hist.accumulate(coords, np.array([0, n], np.int64), np.array([[0, 0]], np.int32),
                        edges, kind, np.ascontiguousarray(box), None, out, True)
        return out[0].astype(np.int64), hist.last_filter

    filtered, (bound, settled) = run(1.0)
    all_double, (bound0, _) = run(0.0)
    np.testing.assert_array_equal(filtered, ref)
    np.testing.assert_array_equal(all_double, ref)
    assert bound >= 0 and bound0 < 0
    # One bin over the range, whose ends no pair comes near: the pairs recomputed are those
    # the slab's band flagged, every edge pair with |dz| = h exactly among them.
    n_edge = 120
    a, b = coords[-2 * n_edge:-n_edge], coords[-n_edge:]
    dz = np.abs((b[:, 2] - a[:, 2]).astype(np.float64))
    n_exact = int(np.count_nonzero(dz == h))
    _, (_, settled_one) = run(1.0, np.array(rng_range, dtype=np.float64))
    assert 5 <= n_exact <= settled_one <= n_edge + 10
