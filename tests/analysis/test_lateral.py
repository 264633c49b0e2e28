"""LateralRDF: in-plane (2D) RDFs against an independent float64 NumPy brute force.

The reference takes each frame's float32 positions, drops the normal component (or, for a
vector normal without a box, projects in NumPy), takes the float32 difference of every pair
(as MDAnalysis and the kernels do) and the least in-plane length over the 2D lattice
translations n_a a + n_b b, |n| <= 3, in float64, then bins as numpy.histogram. It never
calls the package. Counts must agree exactly in double precision.
"""

import warnings

import numpy as np
import pytest
from conftest import (
    datafile,
    load_universe,
    make_universe,
    random_positions_in_box,
    reference_edges,
    requires_gpu,
)
from hypothesis import given
from hypothesis import strategies as st
from MDAnalysis.lib.mdamath import triclinic_vectors
from tables import LATTICE_BOXES

from mdakit_fastrdf import LateralRDF

BOXES = LATTICE_BOXES


def _plane_vectors(dims, axis):
    """The two box vectors spanning the plane normal to `axis` (float64, in-plane parts)."""
    v = triclinic_vectors(np.asarray(dims, np.float32)).astype(np.float64)
    others = [k for k in range(3) if k != axis]
    a, b = (v[0], v[1]) if axis == 2 else (v[others[0]], v[others[1]])
    return a, b


def reference_counts(pos1, pos2, dims, edges, axis=2, vector=None, exclude_self=False):
    """Float64 in-plane minimum-image histogram of one frame (see the module docstring)."""
    p1 = np.asarray(pos1, np.float32).copy()
    p2 = np.asarray(pos2, np.float32).copy()
    if vector is not None:
        n = np.asarray(vector, np.float64) / np.linalg.norm(vector)
        p1 = (p1 - np.outer(p1.astype(np.float64) @ n, n)).astype(np.float32)
        p2 = (p2 - np.outer(p2.astype(np.float64) @ n, n)).astype(np.float32)
    else:
        p1[:, axis] = 0.0
        p2[:, axis] = 0.0
    d = (p2[None, :, :] - p1[:, None, :]).astype(np.float64)  # float32 differences
    if dims is None:
        r = np.sqrt((d * d).sum(-1))
    else:
        a, b = _plane_vectors(dims, axis)
        best = np.full(d.shape[:2], np.inf)
        for na in range(-3, 4):
            for nb in range(-3, 4):
                s = na * a + nb * b
                s[axis] = 0.0
                e = d + s
                best = np.minimum(best, (e * e).sum(-1))
        r = np.sqrt(best)
    if exclude_self:
        np.fill_diagonal(r, np.inf)
    return np.histogram(r.ravel(), bins=edges)[0]


def _universe(dims, n=60, n_frames=3, seed=0):
    rng = np.random.default_rng(seed)
    if dims is None:
        coords = (rng.random((n_frames, n, 3)) * 20.0).astype(np.float32)
    else:
        coords = random_positions_in_box(rng, n, dims, n_frames=n_frames)
    return make_universe(coords, dims, atoms_per_residue=3)


@pytest.mark.parametrize("box,normal", [("ortho", "z"), ("ortho", "x"), ("ortho", "y"),
                                        ("hexagonal", "z"), ("tilted", "z")])
@pytest.mark.parametrize("precision", ["double", "single"])
def test_counts_equal_the_2d_brute_force(box, normal, precision):
    dims = BOXES[box]
    axis = "xyz".index(normal)
    u = _universe(dims)
    g1, g2 = u.atoms[:25], u.atoms[25:]
    edges = reference_edges(40, (0.0, 9.0))
    r = LateralRDF(g1, g2, nbins=40, range=(0.0, 9.0), normal=normal,
                   precision=precision).run()
    ref = sum(reference_counts(g1.positions, g2.positions, dims, edges, axis)
              for _ in u.trajectory)
    if precision == "double":
        np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    else:  # float32 may move pairs within rounding of an edge, by one bin
        assert np.abs(r.results.count - ref).sum() <= 4
    assert r.results.count.sum() > 0


@given(seed=st.integers(0, 2**31 - 1), box=st.sampled_from(sorted(BOXES)),
       rmax=st.floats(2.0, 10.5), nbins=st.integers(1, 60), same=st.booleans())
def test_hypothesis_frames(seed, box, rmax, nbins, same):
    """Random frames, boxes, ranges and bins; one group with itself (every ordered pair,
    each atom with itself at 0) or two groups: exact counts in double precision."""
    dims = BOXES[box]
    u = _universe(dims, n=40, n_frames=2, seed=seed)
    g1 = u.atoms[:17]
    g2 = g1 if same else u.atoms[17:]
    edges = reference_edges(nbins, (0.0, rmax))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rmax beyond half a width: a warning)
        r = LateralRDF(g1, g2, nbins=nbins, range=(0.0, rmax)).run()
    ref = sum(reference_counts(g1.positions, g2.positions, dims, edges) for _ in u.trajectory)
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)


@pytest.mark.parametrize("normal", ["z", (0.3, -0.4, 0.866)])
def test_no_box(normal):
    """Without a box: an axis drops its coordinate; any other vector projects the positions
    onto its plane (float64, then float32, as the reference does independently)."""
    u = _universe(None)
    g1, g2 = u.atoms[:30], u.atoms[30:]
    edges = reference_edges(30, (0.0, 15.0))
    r = LateralRDF(g1, g2, nbins=30, range=(0.0, 15.0), norm="density", normal=normal).run()
    vector = None if isinstance(normal, str) else normal
    ref = sum(reference_counts(g1.positions, g2.positions, None, edges, vector=vector)
              for _ in u.trajectory)
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    ring = np.pi * np.diff(edges ** 2)
    np.testing.assert_allclose(r.results.rdf, ref / (3 * ring), rtol=1e-13)


def test_uniform_layer_gives_one():
    """A uniform random layer (any heights): the lateral g(r) of distinct atoms tends to 1;
    the normalisation is the ring area over the in-plane density."""
    rng = np.random.default_rng(11)
    dims = BOXES["hexagonal"]
    u = make_universe(random_positions_in_box(rng, 3000, dims, n_frames=4), dims)
    r = LateralRDF(u.atoms, u.atoms, nbins=20, range=(1.0, 9.0),
                   exclusion_block=(1, 1)).run()
    g = r.results.rdf
    assert np.all(np.abs(g - 1.0) < 0.03), g
    area = 22.0 * 22.0 * np.sin(np.radians(120.0))
    np.testing.assert_allclose(r.results.rho, [3000 / area] * 2, rtol=1e-5)
    # the normalisation written out
    e = r.results.edges
    expected = r.results.count / (4 * np.pi * np.diff(e ** 2) * (3000 * 2999) / area)
    np.testing.assert_allclose(g, expected, rtol=1e-5)


def test_membrane_phosphates():
    """The shipped membrane system (hexagonal box): lateral P-P RDF of frame 0 against the
    brute force, every backend the same, blocks."""
    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    p = u.select_atoms("name P")
    edges = reference_edges(60, (0.0, 30.0))
    kw = {"nbins": 60, "range": (0.0, 30.0), "exclusion_block": (1, 1)}
    r = LateralRDF(p, p, **kw).run(stop=1)
    u.trajectory[0]
    ref = reference_counts(p.positions, p.positions, u.dimensions, edges, exclude_self=True)
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), ref)
    serial = LateralRDF(p, p, **kw).run().results
    for run_kw in ({"backend": "multiprocessing", "n_workers": 2}, {"blocks": 5}):
        other = LateralRDF(p, p, **kw).run(**run_kw).results
        np.testing.assert_array_equal(other.count, serial.count)
        np.testing.assert_array_equal(other.rdf, serial.rdf)


def test_one_leaflet_with_an_updating_selection():
    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    zmid = u.select_atoms("name P").positions[:, 2].mean()
    upper = u.select_atoms(f"name P and prop z > {zmid}", updating=True)
    r = LateralRDF(upper, upper, nbins=30, range=(0.0, 30.0), exclusion_block=(1, 1)).run()
    total = np.zeros(30, dtype=np.int64)
    edges = r.results.edges
    for f in range(u.trajectory.n_frames):
        u.trajectory[f]
        a = u.select_atoms(f"name P and prop z > {zmid}")
        total += reference_counts(a.positions, a.positions, u.dimensions, edges,
                                  exclude_self=True)
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), total)
    sizes = r.results.frame_group_sizes[:, 0]
    assert 0 < sizes.min() and sizes.max() < len(u.select_atoms("name P"))  # one leaflet


def test_bad_input():
    u = _universe(BOXES["ortho"])
    with pytest.raises(ValueError, match="zero length"):
        LateralRDF(u.atoms, u.atoms, normal=(0, 0, 0))
    with pytest.raises(ValueError, match="normal must be"):
        LateralRDF(u.atoms, u.atoms, normal="w")
    with pytest.raises(ValueError, match="not a lattice plane"):
        LateralRDF(u.atoms, u.atoms, range=(0, 8), normal=(1, 1, 0)).run()
    tilted = _universe(BOXES["tilted"])
    with pytest.raises(ValueError, match="needs an orthorhombic box"):
        LateralRDF(tilted.atoms, tilted.atoms, range=(0, 8), normal="x").run()
    with pytest.raises(ValueError, match="box height along the normal"):
        LateralRDF(tilted.atoms, tilted.atoms, range=(0, 30.0)).run()
    nobox = _universe(None)
    with pytest.raises(ValueError, match="norm='rdf'"):
        LateralRDF(nobox.atoms, nobox.atoms).run()


def test_half_width_warning_names_the_in_plane_width():
    u = _universe(BOXES["ortho"])
    with pytest.warns(UserWarning, match="smallest in-plane width of the box"):
        LateralRDF(u.atoms, u.atoms, range=(0.0, 12.0)).run()


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("precision", ["double", "single"])
def test_gpu_gives_the_cpu_counts(precision):
    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    p = u.select_atoms("name P")
    kw = {"nbins": 300, "range": (0.0, 30.0), "precision": precision}
    gpu = LateralRDF(p, p, device="cuda", **kw).run().results
    cpu = LateralRDF(p, p, device="cpu", **kw).run().results
    np.testing.assert_array_equal(gpu.count_uint64, cpu.count_uint64)


def test_which_rdf_page_code_runs(tmp_path, monkeypatch):
    """docs/which_rdf.rst: its Python block runs as written (few frames), and what the page
    says of the figure holds: the lateral g(r) settles at 1, the 3D one of the same
    phosphates does not, and the leaflet's selection holds about half of them."""
    datafile("GRO_MEMPROT", "XTC_MEMPROT")  # (skips where the membrane is not carried)
    from pathlib import Path

    from test_docs import code_blocks, few_frames

    page = Path(__file__).resolve().parents[2] / "docs" / "which_rdf.rst"
    monkeypatch.chdir(tmp_path)
    blocks = [b for b in code_blocks(page.read_text(encoding="utf-8"), page.name)
              if b.language == "python" and "LateralRDF(" in b.code]
    assert len(blocks) == 2  # the membrane, then pairs within a slab
    namespace = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:
            exec(compile(few_frames(block.code), str(page), "exec"), namespace)  # noqa: S102
    both, leaflet, rdf3d = namespace["both"], namespace["leaflet"], namespace["rdf3d"]
    # the slab keeps a subset of the pairs, 3D distances of pairs in the slab are no shorter
    # than their in-plane ones
    thin, planar = namespace["thin"], namespace["planar"]
    assert np.all(thin.results.count <= both.results.count)
    assert 0 < planar.results.count.sum() < thin.results.count.sum()
    far = both.results.bins > 15.0
    assert abs(both.results.rdf[far].mean() - 1.0) < 0.1
    assert abs(leaflet.results.rdf[far].mean() - 1.0) < 0.15
    assert rdf3d.results.rdf[far].mean() > 1.5
    n_p = len(namespace["p"])
    assert 0.4 * n_p < leaflet.results.frame_group_sizes[:, 0].mean() < 0.6 * n_p
