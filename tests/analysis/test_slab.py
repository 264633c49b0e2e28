"""LateralRDF's slab (|Δz| <= h along the normal): counts against an independent float64
NumPy brute force, the normalisation against a uniform fluid, and bad input.

The reference takes each frame's float32 positions (inside an orthorhombic box), the float32
difference of every pair (as MDAnalysis and the kernels do) widened to float64, the minimum
image per axis d - L rint(d / L) in float64, keeps the pairs with |d_normal| <= h and bins the
in-plane length (distance='lateral') or the 3D length (distance='3d') as numpy.histogram. It
never calls the package. Counts must agree exactly in double precision.
"""

import warnings

import numpy as np
import pytest
from conftest import make_universe, random_positions_in_box, reference_edges, requires_gpu
from hypothesis import given
from hypothesis import strategies as st
from MDAnalysis.lib.mdamath import triclinic_vectors
from tables import LATTICE_BOXES

from mdakit_fastrdf import InterRDF, LateralRDF
from mdakit_fastrdf.analysis.lateral import slab_shell_volumes


def slab_reference(pos1, pos2, dims, edges, h, axis=2, distance="lateral", same=False):
    """Float64 histogram of one frame's pairs within the slab (the module docstring): each
    pair at its nearest lattice image n_a a + n_b b + n_c c, |n| <= 3, whose component along
    the normal is at most h."""
    p1 = np.asarray(pos1, np.float32)
    p2 = np.asarray(pos2, np.float32)
    d0 = (p2[None, :, :] - p1[:, None, :]).astype(np.float64)  # float32 differences
    vectors = triclinic_vectors(np.asarray(dims, np.float32)).astype(np.float64)
    plane = [k for k in range(3) if k != axis]
    best = np.full(d0.shape[:2], np.inf)
    span = range(-3, 4)
    for n in np.array(np.meshgrid(span, span, span)).reshape(3, -1).T:
        d = d0 - n @ vectors
        r2 = d[..., plane[0]] ** 2 + d[..., plane[1]] ** 2
        if distance == "3d":
            r2 = r2 + d[..., axis] ** 2
        r2[np.abs(d[..., axis]) > h] = np.inf
        best = np.minimum(best, r2)
    r = np.sqrt(best)
    zero = 0
    if same:
        np.fill_diagonal(r, np.inf)
        zero = len(p1) if edges[0] == 0 else 0  # each atom with itself, at 0 (InterRDF's rule)
    counts = np.histogram(r[np.isfinite(r)], bins=edges)[0]
    counts[0] += zero
    return counts


def _universe(dims, n=60, n_frames=3, seed=0):
    rng = np.random.default_rng(seed)
    coords = random_positions_in_box(rng, n, dims, n_frames=n_frames)
    return make_universe(coords, dims, atoms_per_residue=3)


def _counts(r):
    return r.results.count_uint64.astype(np.int64)


BOXES = LATTICE_BOXES
DIMS = BOXES["ortho"]


@pytest.mark.parametrize("box,normal", [("ortho", "z"), ("ortho", "x"), ("ortho", "y"),
                                        ("hexagonal", "z"), ("tilted", "z")])
@pytest.mark.parametrize("distance", ["lateral", "3d"])
@pytest.mark.parametrize("method", ["allpairs", "cells"])
def test_counts_equal_the_brute_force(box, normal, distance, method):
    axis = "xyz".index(normal)
    dims = BOXES[box]
    u = _universe(dims, n=90)
    g1, g2 = u.atoms[:35], u.atoms[35:]
    edges = reference_edges(40, (0.0, 9.0))
    ref = sum(slab_reference(g1.positions, g2.positions, dims, edges, 2.5, axis, distance)
              for _ in u.trajectory)
    out = {}
    for precision in ("double", "single"):
        r = LateralRDF(g1, g2, nbins=40, range=(0.0, 9.0), normal=normal, slab=2.5,
                       distance=distance, precision=precision, method=method).run()
        out[precision] = _counts(r)
    np.testing.assert_array_equal(out["double"], ref)
    # float32 may move a pair within rounding of an edge (or of h) by one bin or out
    assert np.abs(out["single"] - ref).sum() <= 4
    assert ref.sum() > 100


@given(seed=st.integers(0, 2**31 - 1), rmax=st.floats(1.0, 10.4), nbins=st.integers(1, 50),
       h=st.floats(0.05, 20.0), same=st.booleans(), distance=st.sampled_from(["lateral", "3d"]),
       normal=st.sampled_from(["x", "y", "z"]), method=st.sampled_from(["allpairs", "cells"]),
       lengths=st.tuples(st.floats(12.0, 40.0), st.floats(12.0, 40.0), st.floats(8.0, 40.0)),
       angles=st.sampled_from([(90.0, 90.0, 90.0), (90.0, 90.0, 120.0), (90.0, 90.0, 60.0),
                               (70.0, 80.0, 95.0), (100.0, 75.0, 110.0)]))
def test_hypothesis_frames(seed, rmax, nbins, h, same, distance, normal, method, lengths,
                           angles):
    """Random boxes (orthorhombic with any normal; triclinic with the normal z), frames,
    ranges, bins, slabs (thin to wider than the box), one group with itself or two: exact
    counts in double precision."""
    if angles != (90.0, 90.0, 90.0):
        normal = "z"
    dims = np.array([*lengths, *angles])
    u = _universe(dims, n=45, n_frames=2, seed=seed)
    g1 = u.atoms[:20]
    g2 = g1 if same else u.atoms[20:]
    edges = reference_edges(nbins, (0.0, rmax))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rmax beyond half a width: a warning)
        r = LateralRDF(g1, g2, nbins=nbins, range=(0.0, rmax), normal=normal, slab=h,
                       distance=distance, precision="double", method=method).run()
    axis = "xyz".index(normal)
    ref = sum(slab_reference(g1.positions, g2.positions, dims, edges, h, axis, distance, same)
              for _ in u.trajectory)
    np.testing.assert_array_equal(_counts(r), ref)


def test_slab_wider_than_the_box_is_no_condition():
    """|Δz| <= h with h at least half the box height keeps every pair: the lateral counts
    are LateralRDF's without a slab, the 3D counts InterRDF's (both double precision), and
    the normalisations agree (rings of the box height; spheres)."""
    u = _universe(DIMS, n=80)
    g1, g2 = u.atoms[:30], u.atoms[30:]
    kw = dict(nbins=30, range=(0.0, 9.0), precision="double")
    plain = LateralRDF(g1, g2, **kw).run()
    wide = LateralRDF(g1, g2, slab=15.0, **kw).run()
    np.testing.assert_array_equal(_counts(wide), _counts(plain))
    np.testing.assert_allclose(wide.results.rdf, plain.results.rdf, rtol=1e-12)
    three = InterRDF(g1, g2, **kw).run()
    wide3 = LateralRDF(g1, g2, slab=100.0, distance="3d", **kw).run()
    np.testing.assert_array_equal(_counts(wide3), _counts(three))
    np.testing.assert_allclose(wide3.results.rdf, three.results.rdf, rtol=1e-12)


@pytest.mark.parametrize("distance", ["lateral", "3d"])
def test_uniform_fluid_gives_one(distance):
    """Uniform random atoms in a box: g(r) -> 1 for pairs within a slab, with the slab's
    own shells (rings of height 2h; spherical shells cut to the slab)."""
    rng = np.random.default_rng(5)
    dims = np.array([40.0, 40.0, 30.0, 90, 90, 90])
    coords = random_positions_in_box(rng, 3000, dims, n_frames=4)
    u = make_universe(coords, dims)
    g1, g2 = u.atoms[:1500], u.atoms[1500:]
    r = LateralRDF(g1, g2, nbins=20, range=(0.0, 12.0), slab=2.0, distance=distance).run()
    # counts per bin >= ~2000 beyond the first bins: 5 % is > 2 sigma
    g = r.results.rdf[4:]
    np.testing.assert_allclose(g, 1.0, atol=0.06)
    assert abs(g.mean() - 1.0) < 0.02


def test_slab_shell_volumes():
    """The ball within the slab: a full sphere below h, a cylinder of height 2h minus the
    caps beyond (independent formulas), and ring area x 2h for shells beyond h."""
    edges = np.linspace(0.0, 6.0, 13)
    h = 1.7
    v = slab_shell_volumes(edges, h)

    def ball_in_slab(R):  # Monte-Carlo-free: the integral of pi (R^2 - z^2) over |z| <= min(h, R)
        from scipy.integrate import quad
        m = min(h, R)
        return quad(lambda z: np.pi * (R * R - z * z), -m, m)[0]

    ref = np.diff([ball_in_slab(R) for R in edges])
    np.testing.assert_allclose(v, ref, rtol=1e-10)
    beyond = edges[:-1] >= h
    np.testing.assert_allclose(v[beyond], (np.pi * np.diff(edges ** 2) * 2 * h)[beyond],
                               rtol=1e-12)


def test_normalisation_by_hand():
    """norm='rdf', 'density' and 'none' from the counts, the frames' volumes and the shells
    (independent arithmetic), for both distances."""
    u = _universe(DIMS, n=70)
    g1, g2 = u.atoms[:30], u.atoms[30:]
    edges = reference_edges(25, (0.0, 8.0))
    h = 1.5
    for distance in ("lateral", "3d"):
        shells = (np.pi * np.diff(edges ** 2) * 2 * h if distance == "lateral"
                  else slab_shell_volumes(edges, h))
        for norm in ("rdf", "density", "none"):
            r = LateralRDF(g1, g2, nbins=25, range=(0.0, 8.0), slab=h, distance=distance,
                           norm=norm).run()
            c = r.results.count
            n = u.trajectory.n_frames
            volume = np.prod(DIMS[:3].astype(np.float32).astype(np.float64))
            expected = {"rdf": c / (n * shells * 30 * 40 / volume),
                        "density": c / (n * shells), "none": c / n}[norm]
            np.testing.assert_allclose(r.results.rdf, expected, rtol=1e-10)


def test_backends_and_blocks_give_the_same_counts():
    u = _universe(DIMS, n=60, n_frames=6)
    g1, g2 = u.atoms[:25], u.atoms[25:]
    kw = dict(nbins=30, range=(0.0, 9.0), slab=3.0, distance="3d")
    serial = LateralRDF(g1, g2, **kw).run()
    multi = LateralRDF(g1, g2, **kw).run(backend="multiprocessing", n_workers=2)
    np.testing.assert_array_equal(_counts(multi), _counts(serial))
    np.testing.assert_array_equal(multi.results.rdf, serial.results.rdf)
    blocks = LateralRDF(g1, g2, **kw).run(blocks=3)
    np.testing.assert_array_equal(_counts(blocks), _counts(serial))
    # each block normalised as a run over its own frames
    for b, frames in enumerate(np.array_split(np.arange(6), 3)):
        alone = LateralRDF(g1, g2, **kw).run(frames=frames)
        np.testing.assert_allclose(blocks.results.block_rdf[b], alone.results.rdf, rtol=1e-12)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(slab=0.0), ValueError, "slab must be a positive"),
    (dict(slab=-1.0), ValueError, "slab must be a positive"),
    (dict(slab=float("nan")), ValueError, "slab must be a positive"),
    (dict(slab=True), TypeError, "slab must be a length"),
    (dict(slab="1"), TypeError, "slab must be a length"),
    (dict(distance="3d"), ValueError, "no slab is given"),
    (dict(slab=1.0, distance="xy"), ValueError, "distance must be one of"),
    (dict(slab=1.0, normal=(0.0, 0.6, 0.8)), ValueError, "slab needs the normal along a box"),
])
def test_bad_input(kwargs, error, match):
    u = _universe(DIMS)
    with pytest.raises(error, match=match):
        LateralRDF(u.atoms[:10], u.atoms[10:], **kwargs)


def test_no_box_and_a_triclinic_normal_other_than_z_are_refused():
    u = _universe(BOXES["hexagonal"])
    with pytest.raises(ValueError, match="normal='x' needs an orthorhombic box"):
        LateralRDF(u.atoms[:10], u.atoms[10:], slab=1.0, normal="x").run()
    coords = random_positions_in_box(np.random.default_rng(0), 30, DIMS)
    u = make_universe(coords, None)
    with pytest.raises(ValueError, match="slab needs a periodic box, and frame 0 has none"):
        LateralRDF(u.atoms[:10], u.atoms[10:], slab=1.0, norm="density").run()


@requires_gpu
@pytest.mark.parametrize("distance", ["lateral", "3d"])
@pytest.mark.parametrize("method", ["allpairs", "cells"])
def test_gpu_counts_equal_the_cpu(distance, method):
    """Both precisions: the GPU's counts are the CPU's, bit for bit; double equals the
    brute force."""
    u = _universe(DIMS, n=1500, n_frames=2, seed=3)
    g1, g2 = u.atoms[:600], u.atoms[600:]
    edges = reference_edges(60, (0.0, 10.0))
    ref = sum(slab_reference(g1.positions, g2.positions, DIMS, edges, 1.2, 2, distance)
              for _ in u.trajectory)
    for precision in ("single", "double"):
        kw = dict(nbins=60, range=(0.0, 10.0), slab=1.2, distance=distance,
                  precision=precision, method=method)
        cpu = LateralRDF(g1, g2, device="cpu", **kw).run()
        gpu = LateralRDF(g1, g2, device="cuda", **kw).run()
        np.testing.assert_array_equal(_counts(gpu), _counts(cpu))
        if precision == "double":
            np.testing.assert_array_equal(_counts(gpu), ref)


@pytest.mark.parametrize("box", ["hexagonal", "tilted", "ortho"])
@pytest.mark.parametrize("distance", ["lateral", "3d"])
def test_cell_lists_with_several_cells_per_axis(box, distance):
    """Enough atoms for a grid of several cells along every axis, a thin slab (the cells
    along the normal shrink to it): exact counts in double precision."""
    dims = BOXES[box] * np.array([1.6, 1.6, 1.6, 1, 1, 1])
    u = _universe(dims, n=420, n_frames=1, seed=7)
    g1, g2 = u.atoms[:170], u.atoms[170:]
    edges = reference_edges(30, (0.0, 7.0))
    ref = slab_reference(g1.positions, g2.positions, dims, edges, 0.8, 2, distance)
    r = LateralRDF(g1, g2, nbins=30, range=(0.0, 7.0), slab=0.8, distance=distance,
                   precision="double", method="cells").run()
    np.testing.assert_array_equal(_counts(r), ref)
    assert r._engine.last_method == "cells"


def test_updating_layer():
    """A layer of g1 that changes every frame (an UpdatingAtomGroup, maicos's layers) against
    every atom, pairs of one residue excluded: the counts are the brute force of each
    frame's layer, summed."""
    u = _universe(BOXES["hexagonal"], n=120, n_frames=4, seed=11)
    layer = u.select_atoms("prop z >= 10 and prop z < 16", updating=True)
    edges = reference_edges(30, (0.0, 9.0))
    r = LateralRDF(layer, u.atoms, nbins=30, range=(0.0, 9.0), slab=1.5, distance="3d",
                   exclude_same="residue", precision="double").run()
    ref = np.zeros(30, np.int64)
    for ts in u.trajectory:
        z = u.atoms.positions[:, 2]
        inside = (z >= 10) & (z < 16)
        resid = u.atoms.resindices
        for i in np.nonzero(inside)[0]:  # each atom of the layer, other residues' atoms
            others = np.nonzero(resid != resid[i])[0]
            ref += slab_reference(u.atoms.positions[[i]], u.atoms.positions[others],
                                  BOXES["hexagonal"], edges, 1.5, 2, "3d")
    np.testing.assert_array_equal(_counts(r), ref)
    assert ref.sum() > 0
