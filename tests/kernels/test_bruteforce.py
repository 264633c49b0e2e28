"""InterRDF against an independent float64 NumPy brute-force reference.

Random systems (fixed seeds, plus a few hypothesis-driven cases) without a box, in
orthorhombic and in (strongly skewed) triclinic boxes, with ``range[1]`` below, near and
far above half the smallest box width -- where a naive "27 neighbouring images" minimum
image is no longer enough.

* ``precision='double'`` must reproduce the reference counts *exactly*: the reference
  builds the difference vector as the float32 subtraction of float32 positions (as
  MDAnalysis and the package do) and then works in float64, and the positions are
  generated inside the primary cell (wrapping them again is a no-op), so there is no
  rounding ambiguity left.
* ``precision='single'`` may only move pairs lying within float32 rounding of a bin edge.
"""

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import (
    assert_single_precision_close,
    box_matrix,
    box_widths,
    brute_force_counts,
    make_universe,
    near_edge_count,
    random_positions_in_box,
    reference_edges,
)

from mdakit_fastrdf import InterRDF

BOXES = {
    "nobox": None,
    "cube30": (30.0, 30.0, 30.0, 90.0, 90.0, 90.0),
    "ortho": (31.0, 27.5, 35.25, 90.0, 90.0, 90.0),
    "rhombic60": (30.0, 30.0, 30.0, 60.0, 60.0, 90.0),
    "tric_obtuse": (40.0, 35.0, 30.0, 70.0, 80.0, 100.0),
    "tric_skewed": (30.0, 30.0, 30.0, 35.0, 40.0, 45.0),
}


def _positions(rng, n, dims, n_frames):
    if dims is None:
        # a cluster of 24 A with some negative coordinates
        return (rng.random((n_frames, n, 3)) * 24.0 - 6.0).astype(np.float32)
    return random_positions_in_box(rng, n, dims, n_frames=n_frames)


def _ranges_for(dims):
    """(label, range, nbins): below half the smallest width, just below it, far above it,
    and a range that does not start at zero."""
    w = 24.0 if dims is None else float(min(box_widths(dims)))
    return [
        ("half", (0.0, round(0.49 * w, 3)), 75),
        ("big", (0.0, round(0.9 * w, 3)), 60),
        ("offset", (2.5, 12.0), 37),
    ]


_REF_CACHE = {}


def _reference(box_name, range_label, same):
    """(universe, g1, g2, edges, ref_counts, near_edge) for one case, computed once."""
    key = (box_name, range_label, same)
    if key in _REF_CACHE:
        return _REF_CACHE[key]
    dims = BOXES[box_name]
    rng = np.random.default_rng(zlib.crc32(repr(key).encode()))
    n1, n2, n_frames = 260, 330, 2
    n_atoms = n1 if same else n1 + n2
    coords = _positions(rng, n_atoms, dims, n_frames)
    u = make_universe(coords, dims)
    g1 = u.atoms[:n1]
    g2 = g1 if same else u.atoms[n1:]
    label, rng_range, nbins = next(r for r in _ranges_for(dims) if r[0] == range_label)
    edges = reference_edges(nbins, rng_range)
    ref = np.zeros(nbins, dtype=np.int64)
    near = 0
    for f in range(n_frames):
        c, d = brute_force_counts(coords[f, g1.ix], coords[f, g2.ix], dims, edges,
                                  return_distances=True)
        ref += c
        near += near_edge_count(d, edges)
    out = (u, g1, g2, rng_range, nbins, edges, ref, near)
    _REF_CACHE[key] = out
    return out


@pytest.mark.parametrize("same", [True, False], ids=["g1==g2", "g1!=g2"])
@pytest.mark.parametrize("range_label", ["half", "big", "offset"])
@pytest.mark.parametrize("box_name", list(BOXES))
@pytest.mark.parametrize("precision", ["double", "single"])
def test_random_system_matches_bruteforce(precision, box_name, range_label, same):
    """Counts of random systems equal the brute-force minimum-image histogram: exactly in
    double precision, within the bin-edge tolerance in single precision. Covers no box,
    orthorhombic and skewed triclinic cells, ranges far beyond half the box width, a range
    not starting at 0, and g1 == g2 (ordered pairs plus self pairs at distance 0)."""
    u, g1, g2, rng_range, nbins, edges, ref, near = _reference(box_name, range_label, same)
    r = InterRDF(g1, g2, nbins=nbins, range=rng_range,
                 norm="none" if BOXES[box_name] is None else "rdf",
                 precision=precision).run()
    np.testing.assert_array_equal(r.results.edges, edges)
    counts = r.results.count_uint64
    assert counts.dtype == np.uint64
    np.testing.assert_array_equal(r.results.count, counts.astype(np.float64))
    if precision == "double":
        np.testing.assert_array_equal(counts.astype(np.int64), ref)
    else:
        assert_single_precision_close(counts, ref, near, f"{box_name}/{range_label}")
    if same and rng_range[0] == 0.0:
        # every atom with itself lands in the first bin, each frame
        assert counts[0] >= len(g1) * u.trajectory.n_frames


def test_large_group_pair_matches_bruteforce():
    """A 1500 x 1500 pair set in a skewed triclinic box, range above half the smallest
    width: exact in double precision (exercises the cache-blocked tiling of the kernel)."""
    dims = BOXES["tric_skewed"]
    rng = np.random.default_rng(99)
    coords = random_positions_in_box(rng, 3000, dims)
    u = make_universe(coords, dims)
    g1, g2 = u.atoms[:1500], u.atoms[1500:]
    rng_range = (0.0, 0.6 * float(min(box_widths(dims))))
    edges = reference_edges(50, rng_range)
    ref = brute_force_counts(coords[0, :1500], coords[0, 1500:], dims, edges)
    r = InterRDF(g1, g2, nbins=50, range=rng_range, precision="double").run()
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)


def test_same_group_identity_vs_equal_groups():
    """g1 == g2 passed as the same object and as two equal AtomGroup objects give the same
    counts (ordered pairs plus self pairs), equal to the brute force over all (i, j)."""
    dims = BOXES["rhombic60"]
    rng = np.random.default_rng(5)
    coords = random_positions_in_box(rng, 200, dims)
    u = make_universe(coords, dims)
    edges = reference_edges(40, (0.0, 10.0))
    ref = brute_force_counts(coords[0], coords[0], dims, edges)
    a = InterRDF(u.atoms, u.atoms, nbins=40, range=(0, 10), precision="double").run()
    b = InterRDF(u.atoms[:], u.select_atoms("all"), nbins=40, range=(0, 10),
                 precision="double").run()
    np.testing.assert_array_equal(a.results.count_uint64.astype(np.int64), ref)
    np.testing.assert_array_equal(b.results.count_uint64, a.results.count_uint64)
    # the self pairs: exactly n atoms at distance 0 are in bin 0 (plus real close pairs)
    ref_noself = brute_force_counts(coords[0], coords[0], dims, edges, same=True)
    assert ref[0] - ref_noself[0] == 200
    assert (ref - ref_noself)[1:].sum() == 0


def test_same_group_in_permuted_order():
    """g2 holding the atoms of g1 in another order is still every ordered pair plus self
    pairs; counts are independent of atom order."""
    dims = BOXES["ortho"]
    rng = np.random.default_rng(6)
    coords = random_positions_in_box(rng, 150, dims)
    u = make_universe(coords, dims)
    perm = rng.permutation(150)
    edges = reference_edges(30, (0.0, 12.0))
    ref = brute_force_counts(coords[0], coords[0], dims, edges)
    r = InterRDF(u.atoms, u.atoms[perm], nbins=30, range=(0, 12), precision="double").run()
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)


def test_overlapping_groups():
    """g1 and g2 sharing part of their atoms: shared atoms contribute their self pair at
    distance 0, as in MDAnalysis."""
    dims = BOXES["tric_obtuse"]
    rng = np.random.default_rng(8)
    coords = random_positions_in_box(rng, 300, dims)
    u = make_universe(coords, dims)
    g1, g2 = u.atoms[:200], u.atoms[100:]
    edges = reference_edges(45, (0.0, 13.0))
    ref = brute_force_counts(coords[0, :200], coords[0, 100:], dims, edges)
    r = InterRDF(g1, g2, nbins=45, range=(0, 13), precision="double").run()
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)


# ----------------------------------------------------------------------------------------
# Exclusions
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("box_name", ["nobox", "ortho", "tric_skewed"])
@pytest.mark.parametrize(
    "n1, n2, block, same",
    [(240, 240, (1, 1), True), (240, 240, (3, 3), True), (200, 200, (1, 1), False),
     (200, 200, (4, 4), False), (120, 360, (1, 3), False), (240, 160, (3, 2), False)],
    ids=["self-1-1", "self-3-3", "pair-1-1", "pair-4-4", "pair-1-3", "pair-3-2"],
)
def test_exclusion_block_matches_bruteforce(box_name, n1, n2, block, same):
    """exclusion_block=(a, b) removes exactly the pairs with i // a == j // b (i, j the
    positions within g1 and g2); for (a, a) on the same group this includes the self
    pairs. Exact in double precision."""
    dims = BOXES[box_name]
    rng = np.random.default_rng([n1, n2, *block, int(same)])
    n_atoms = n1 if same else n1 + n2
    coords = _positions(rng, n_atoms, dims, 2)
    u = make_universe(coords, dims)
    g1 = u.atoms[:n1]
    g2 = g1 if same else u.atoms[n1:]
    edges = reference_edges(50, (0.0, 11.0))
    ref = sum(
        brute_force_counts(coords[f, g1.ix], coords[f, g2.ix], dims, edges,
                           exclusion_block=block)
        for f in range(2)
    )
    norm = "none" if dims is None else "rdf"
    r = InterRDF(g1, g2, nbins=50, range=(0, 11), exclusion_block=block, norm=norm,
                 precision="double").run()
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    if norm == "rdf":
        # MDAnalysis' normalisation: N = nA*nB - a*b*(nA/a)
        n_pairs = n1 * n2 - block[0] * block[1] * (n1 / block[0])
        vol = np.mean([u.trajectory[f].volume for f in range(2)])
        shell = 4 / 3 * np.pi * np.diff(edges**3)
        np.testing.assert_allclose(r.results.rdf, ref / (2 * shell * n_pairs / vol),
                                   rtol=1e-12)


@pytest.mark.parametrize("exclude_same", ["residue", "segment", "chain"])
@pytest.mark.parametrize("same", [True, False], ids=["g1==g2", "g1!=g2"])
@pytest.mark.parametrize("box_name", ["nobox", "rhombic60"])
def test_exclude_same_matches_bruteforce(exclude_same, same, box_name):
    """exclude_same removes pairs sharing resindex / segindex / chainID (including each
    atom with itself), nothing else."""
    dims = BOXES[box_name]
    rng = np.random.default_rng(11)
    n = 300
    coords = _positions(rng, n, dims, 2)
    chain_ids = np.array(["A", "B", "C", "D"])[rng.integers(0, 4, n)]
    u = make_universe(coords, dims, atoms_per_residue=3, residues_per_segment=7,
                      chain_ids=chain_ids)
    if same:
        g1 = g2 = u.atoms[:200]
    else:
        # interleaved groups, so residues/segments are split between g1 and g2
        g1, g2 = u.atoms[::2], u.atoms[1::2]
    attr = {"residue": "resindices", "segment": "segindices", "chain": "chainIDs"}[exclude_same]
    l1, l2 = getattr(g1, attr), getattr(g2, attr)
    edges = reference_edges(40, (0.0, 9.5))
    ref = sum(
        brute_force_counts(coords[f, g1.ix], coords[f, g2.ix], dims, edges,
                           labels1=l1, labels2=l2)
        for f in range(2)
    )
    r = InterRDF(g1, g2, nbins=40, range=(0, 9.5), exclude_same=exclude_same,
                 norm="density", precision="double").run()
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    if same:
        assert r.results.count[0] == ref[0]  # no self pairs left in bin 0


# ----------------------------------------------------------------------------------------
# Special geometries
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("box_name", ["nobox", "cube30", "tric_obtuse"])
def test_duplicated_atoms(precision, box_name):
    """Atoms of g2 that exactly duplicate atoms of g1 are at distance 0: first bin when
    range[0] == 0, not counted at all when range[0] > 0."""
    dims = BOXES[box_name]
    rng = np.random.default_rng(12)
    base = _positions(rng, 60, dims, 1)[0]
    coords = np.concatenate([base, base[:40], base[:40]])[None]  # 40 atoms twice more
    u = make_universe(coords, dims)
    g1, g2 = u.atoms[:60], u.atoms[60:]
    for rng_range in [(0.0, 10.0), (0.5, 10.0)]:
        edges = reference_edges(20, rng_range)
        ref, d = brute_force_counts(coords[0, :60], coords[0, 60:], dims, edges,
                                    return_distances=True)
        r = InterRDF(g1, g2, nbins=20, range=rng_range, precision=precision,
                     norm="none").run()
        counts = r.results.count_uint64.astype(np.int64)
        if precision == "double":
            np.testing.assert_array_equal(counts, ref)
        else:
            assert_single_precision_close(counts, ref, near_edge_count(d, edges))
        if rng_range[0] == 0.0:
            assert counts[0] >= 80
    # the duplicates with their originals, counted at distance exactly 0
    r = InterRDF(g1, g2, nbins=20, range=(0.0, 1e-3), precision=precision, norm="none").run()
    assert r.results.count_uint64[0] == 80


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("box_name", ["nobox", "ortho", "tric_skewed"])
def test_single_atom_groups(precision, box_name):
    """A group of one atom: one against many, and one against itself (only the self pair,
    at distance 0)."""
    dims = BOXES[box_name]
    rng = np.random.default_rng(13)
    coords = _positions(rng, 101, dims, 2)
    u = make_universe(coords, dims)
    one, many = u.atoms[:1], u.atoms[1:]
    edges = reference_edges(30, (0.0, 14.0))
    ref = np.zeros(30, dtype=np.int64)
    near = 0
    for f in range(2):
        c, d = brute_force_counts(coords[f, :1], coords[f, 1:], dims, edges,
                                  return_distances=True)
        ref += c
        near += near_edge_count(d, edges)
    norm = "none" if dims is None else "rdf"
    for g1, g2 in [(one, many), (many, one)]:
        r = InterRDF(g1, g2, nbins=30, range=(0, 14), precision=precision, norm=norm).run()
        counts = r.results.count_uint64.astype(np.int64)
        if precision == "double":
            np.testing.assert_array_equal(counts, ref)
        else:
            assert_single_precision_close(counts, ref, near)
    r = InterRDF(one, one, nbins=30, range=(0, 14), precision=precision, norm=norm).run()
    expected = np.zeros(30, dtype=np.uint64)
    expected[0] = 2
    np.testing.assert_array_equal(r.results.count_uint64, expected)


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("dims", [None, (40.0, 40.0, 40.0, 90.0, 90.0, 90.0)])
def test_distances_exactly_on_edges_and_range_limits(precision, dims):
    """Axis-aligned pairs have distances that are exact in any precision. A distance equal
    to an inner edge goes to the bin on its right, one equal to range[1] to the last bin
    (numpy.histogram's closed last bin), one just above range[1] or just below range[0]
    is not counted, one equal to range[0] is counted in bin 0."""
    rmin, rmax, nbins = 2.0, 10.0, 8  # edges 2, 3, ..., 10
    up = np.nextafter(np.float32(rmax), np.float32(20))
    down = np.nextafter(np.float32(rmax), np.float32(0))
    below_min = np.nextafter(np.float32(rmin), np.float32(0))
    offsets = np.array([3.0, 5.0, rmax, up, down, rmin, below_min, 5.5, 0.0],
                       dtype=np.float32)
    origin = np.array([0.0, 1.0, 1.0], dtype=np.float32)
    g2pos = np.stack([origin + np.array([o, 0, 0], dtype=np.float32) for o in offsets])
    # x - 0.0 in float32 recovers the offset exactly
    assert np.array_equal(g2pos[:, 0] - origin[0], offsets)
    coords = np.concatenate([origin[None], g2pos])[None]
    u = make_universe(coords, dims)
    r = InterRDF(u.atoms[:1], u.atoms[1:], nbins=nbins, range=(rmin, rmax),
                 precision=precision, norm="none").run()
    expected = np.zeros(nbins, dtype=np.uint64)
    expected[1] += 1  # 3.0 -> [3, 4)
    expected[3] += 1  # 5.0 -> [5, 6)
    expected[7] += 1  # 10.0 == range[1] -> last bin
    expected[7] += 1  # just below 10.0 -> last bin
    expected[0] += 1  # 2.0 == range[0] -> first bin
    expected[3] += 1  # 5.5
    if dims is not None and precision == "double":
        # One atom in g1: MDAnalysis takes its brute-force path, whose orthorhombic minimum
        # image scales distances by float32(1/L) * L != 1, and double precision reproduces
        # InterRDF, not exact arithmetic. Check against InterRDF itself.
        from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

        expected = MDAInterRDF(u.atoms[:1], u.atoms[1:], nbins=nbins, range=(rmin, rmax),
                               norm="none").run().results.count.astype(np.uint64)
    np.testing.assert_array_equal(r.results.count_uint64, expected)


def test_pairs_near_range_max_random():
    """Many pairs at distances within a few float32 ulps of range[1]: double precision is
    exact; single precision only moves pairs across the limit that are within rounding."""
    rng = np.random.default_rng(21)
    dims = BOXES["cube30"]
    rmax = 7.3
    n = 400
    center = np.array([15.0, 15.0, 15.0])
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1)[:, None]
    radii = rmax * (1 + rng.uniform(-3e-7, 3e-7, n))
    pos = (center + dirs * radii[:, None]).astype(np.float32)
    coords = np.concatenate([center[None].astype(np.float32), pos])[None]
    u = make_universe(coords, dims)
    edges = reference_edges(10, (0.0, rmax))
    ref, d = brute_force_counts(coords[0, :1], coords[0, 1:], dims, edges,
                                return_distances=True)
    assert 0 < ref.sum() < n  # some in, some out
    rd = InterRDF(u.atoms[:1], u.atoms[1:], nbins=10, range=(0, rmax),
                  precision="double").run()
    np.testing.assert_array_equal(rd.results.count_uint64.astype(np.int64), ref)
    rs = InterRDF(u.atoms[:1], u.atoms[1:], nbins=10, range=(0, rmax),
                  precision="single").run()
    assert_single_precision_close(rs.results.count_uint64, ref, near_edge_count(d, edges))


def test_varying_box_volume_normalisation():
    """Boxes changing from frame to frame: volume_cum is the sum of the frame volumes and
    the rdf uses their mean, as in MDAnalysis."""
    rng = np.random.default_rng(31)
    n_frames, n = 3, 150
    dims = np.array([[20.0 + f, 21.0, 22.0 - f, 80.0, 90.0, 100.0 + 5 * f]
                     for f in range(n_frames)])
    coords = np.stack([random_positions_in_box(rng, n, dims[f])[0] for f in range(n_frames)])
    u = make_universe(coords, dims)
    edges = reference_edges(25, (0.0, 9.0))
    ref = sum(brute_force_counts(coords[f], coords[f], dims[f], edges)
              for f in range(n_frames))
    r = InterRDF(u.atoms, u.atoms, nbins=25, range=(0, 9.0), precision="double").run()
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    vols = [abs(np.linalg.det(box_matrix(dims[f]))) for f in range(n_frames)]
    np.testing.assert_allclose(r.results.volume_cum, sum(vols), rtol=1e-6)
    shell = 4 / 3 * np.pi * np.diff(edges**3)
    expected = ref / (n_frames * shell * n * n / (r.results.volume_cum / n_frames))
    np.testing.assert_allclose(r.results.rdf, expected, rtol=1e-12)


# ----------------------------------------------------------------------------------------
# Hypothesis-driven cases
# ----------------------------------------------------------------------------------------


@st.composite
def _systems(draw):
    kind = draw(st.sampled_from(["nobox", "ortho", "triclinic"]))
    if kind == "nobox":
        dims = None
    else:
        lengths = [draw(st.floats(12.0, 40.0)) for _ in range(3)]
        if kind == "ortho":
            angles = [90.0, 90.0, 90.0]
        else:
            angles = [draw(st.floats(40.0, 140.0)) for _ in range(3)]
        dims = tuple(np.float32(v) for v in lengths + angles)
        try:
            b = box_matrix(dims)
        except AssertionError:
            assume(False)
        # reject nearly flat cells
        assume(abs(np.linalg.det(b)) > 0.15 * np.prod(lengths))
    n1 = draw(st.integers(1, 70))
    n2 = draw(st.integers(1, 70))
    same = draw(st.booleans())
    nbins = draw(st.integers(1, 60))
    width = 25.0 if dims is None else float(min(box_widths(dims)))
    rmax = draw(st.floats(0.05, 1.3)) * width
    rmin = draw(st.sampled_from([0.0, 0.0, 0.1 * rmax, 0.5 * rmax]))
    seed = draw(st.integers(0, 2**32 - 1))
    return dims, n1, n2, same, nbins, (float(rmin), float(rmax)), seed


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_systems())
def test_hypothesis_random_systems(system):
    """Arbitrary small systems, boxes (including skewed triclinic cells and ranges larger
    than the box), ranges and bin counts: double precision is exact against the brute
    force; single precision stays within the bin-edge tolerance."""
    dims, n1, n2, same, nbins, rng_range, seed = system
    rng = np.random.default_rng(seed)
    n_atoms = n1 if same else n1 + n2
    coords = _positions(rng, n_atoms, dims, 2)
    u = make_universe(coords, dims)
    g1 = u.atoms[:n1]
    g2 = g1 if same else u.atoms[n1:]
    edges = reference_edges(nbins, rng_range)
    ref = np.zeros(nbins, dtype=np.int64)
    near = 0
    for f in range(2):
        c, d = brute_force_counts(coords[f, g1.ix], coords[f, g2.ix], dims, edges,
                                  return_distances=True)
        ref += c
        near += near_edge_count(d, edges)
    norm = "none" if dims is None else "rdf"
    rd = InterRDF(g1, g2, nbins=nbins, range=rng_range, norm=norm, precision="double").run()
    np.testing.assert_array_equal(rd.results.count_uint64.astype(np.int64), ref)
    rs = InterRDF(g1, g2, nbins=nbins, range=rng_range, norm=norm, precision="single").run()
    assert_single_precision_close(rs.results.count_uint64, ref, near)
