"""CylindricalRDF: distances from an axis against an independent float64 NumPy brute force.

The reference takes each frame's float32 positions and the axis point (float64, rounded
to float32 as every position is), drops the component along the axis (or, for a vector
axis without a box, projects in NumPy), takes the float32 difference of each atom and the
point, and the least in-plane length over the 2D lattice translations n_a a + n_b b,
|n| <= 3, in float64 (the distance from the nearest periodic image of the axis); then
bins as numpy.histogram. It never calls the package. Counts must agree exactly in double
precision. The positions are drawn inside the primary cell, so the package's wrapping
leaves them as they are.
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
)
from hypothesis import given
from hypothesis import strategies as st
from MDAnalysis.lib.mdamath import triclinic_vectors
from tables import LATTICE_BOXES, OBLIQUE_BOX

from mdakit_fastrdf import CylindricalRDF, LateralRDF

BOXES = {"ortho": LATTICE_BOXES["ortho"], "hexagonal": LATTICE_BOXES["hexagonal"],
         "oblique": OBLIQUE_BOX}
TILTED = LATTICE_BOXES["tilted"]  # c out of the z axis: refused


def box_vectors(dims):
    return triclinic_vectors(np.asarray(dims, np.float32)).astype(np.float64)


def axis_distances(pos, point, dims, axis=2, vector=None):
    """Float64 distances of `pos` from the axis through `point` (see the module)."""
    p = np.asarray(pos, np.float32).copy()
    s = np.asarray(point, np.float64).astype(np.float32).reshape(1, 3).copy()
    if vector is not None:
        n = np.asarray(vector, np.float64) / np.linalg.norm(vector)
        p = (p - np.outer(p.astype(np.float64) @ n, n)).astype(np.float32)
        s = (s - np.outer(s.astype(np.float64) @ n, n)).astype(np.float32)
    else:
        p[:, axis] = 0.0
        s[:, axis] = 0.0
    d = (p - s).astype(np.float64)  # the float32 difference
    if dims is None:
        return np.sqrt((d * d).sum(-1))
    v = box_vectors(dims)
    a, b = (v[0], v[1]) if axis == 2 else [v[k] for k in range(3) if k != axis]
    best = np.full(len(d), np.inf)
    for na in range(-3, 4):
        for nb in range(-3, 4):
            t = na * a + nb * b
            t[axis] = 0.0
            e = d + t
            best = np.minimum(best, (e * e).sum(-1))
    return np.sqrt(best)


def reference_counts(pos, point, dims, edges, axis=2, vector=None):
    return np.histogram(axis_distances(pos, point, dims, axis, vector), bins=edges)[0]


def box_centre(dims):
    return 0.5 * box_vectors(dims).sum(axis=0)


def _universe(dims, n=60, n_frames=3, seed=0):
    rng = np.random.default_rng(seed)
    if dims is None:
        coords = (rng.random((n_frames, n, 3)) * 20.0).astype(np.float32)
    else:
        coords = random_positions_in_box(rng, n, dims, n_frames=n_frames)
    return make_universe(coords, dims, atoms_per_residue=3)


def _counts(r):
    return r.results.count_uint64.astype(np.int64)


@pytest.mark.parametrize("box,axis", [("ortho", "z"), ("ortho", "x"), ("ortho", "y"),
                                      ("hexagonal", "z"), ("oblique", "z")])
@pytest.mark.parametrize("precision", ["double", "single"])
def test_counts_equal_the_brute_force(box, axis, precision):
    """Fixed origin in the box: every axis of an orthorhombic box, z of triclinic ones."""
    dims = BOXES[box]
    k = "xyz".index(axis)
    u = _universe(dims, n=200)
    atoms = u.atoms[10:]
    origin = (7.25, 9.5, 3.0)
    edges = reference_edges(40, (0.0, 9.0))
    r = CylindricalRDF(atoms, nbins=40, range=(0.0, 9.0), axis=axis, origin=origin,
                       precision=precision).run()
    ref = sum(reference_counts(atoms.positions, origin, dims, edges, k) for _ in u.trajectory)
    if precision == "double":
        np.testing.assert_array_equal(_counts(r), ref)
    else:  # float32 may move an atom within rounding of an edge by one bin
        assert np.abs(r.results.count - ref).sum() <= 4
    assert ref.sum() > 100
    np.testing.assert_array_equal(r.results.frame_origin, [origin] * 3)


@given(seed=st.integers(0, 2**31 - 1), box=st.sampled_from(sorted(BOXES) + ["none"]),
       axis=st.sampled_from(["x", "y", "z", "vector"]), where=st.sampled_from(
           ["origin", "refgroup", "centre"]),
       rmax=st.floats(1.0, 10.5), rmin_frac=st.floats(0.0, 0.9), nbins=st.integers(1, 60))
def test_hypothesis_frames(seed, box, axis, where, rmax, rmin_frac, nbins):
    """Random frames, boxes (and none), axes, axis points (fixed, a group's centre, the box
    centre), ranges and bins: exact counts in double precision."""
    dims = None if box == "none" else BOXES[box]
    if dims is None and where == "centre":
        where = "origin"
    if axis in ("x", "y") and box in ("hexagonal", "oblique"):
        axis = "z"  # (x, y need an orthorhombic box: test_bad_input)
    vector = None
    if axis == "vector":
        if dims is not None:
            axis = "z"
        else:
            vector = np.random.default_rng(seed).normal(size=3)
    u = _universe(dims, n=50, n_frames=2, seed=seed)
    atoms, ref_atoms = u.atoms[:40], u.atoms[40:]
    origin = np.random.default_rng(seed + 1).random(3) * 18.0 + 1.0  # inside every box
    rng = (rmin_frac * rmax, rmax)
    kw = {"origin": origin} if where == "origin" else (
        {"refgroup": ref_atoms} if where == "refgroup" else {})
    k = 2 if vector is not None else "xyz".index(axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rmax beyond half a width: a warning)
        r = CylindricalRDF(atoms, nbins=nbins, range=rng, norm="none",
                           axis=vector if vector is not None else axis, **kw).run()
    edges = reference_edges(nbins, rng)
    total = 0
    for ts in u.trajectory:
        point = (origin if where == "origin" else box_centre(dims) if where == "centre"
                 else ref_atoms.positions.astype(np.float64).mean(axis=0))
        np.testing.assert_array_equal(r.results.frame_origin[ts.frame], point)
        total = total + reference_counts(atoms.positions, point, dims, edges, k, vector)
    np.testing.assert_array_equal(_counts(r), total)


def test_axis_through_a_moving_group():
    """The axis follows the centre of refgroup (here a ring of 12 atoms, a "nanotube",
    moved in the plane in every frame; some of its atoms wrapped across the box): counts
    against the brute force with each frame's centre, which differ from those around the
    first frame's centre."""
    dims = np.array([30.0, 30.0, 20.0, 90, 90, 90])
    rng = np.random.default_rng(5)
    n_frames, n_water = 4, 300
    coords = np.empty((n_frames, 12 + n_water, 3), dtype=np.float32)
    centres = np.array([[15.0, 15.0], [17.5, 13.0], [12.0, 18.5], [20.0, 21.0]])
    angle = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    for f in range(n_frames):
        ring = np.stack([centres[f, 0] + 4 * np.cos(angle), centres[f, 1] + 4 * np.sin(angle),
                         np.linspace(0, 19, 12)], axis=1)
        coords[f, :12] = ring
        coords[f, 12:] = random_positions_in_box(rng, n_water, dims)[0]
    u = make_universe(coords, dims)
    tube, water = u.atoms[:12], u.atoms[12:]
    kw = {"nbins": 30, "range": (0.0, 12.0)}
    r = CylindricalRDF(water, refgroup=tube, **kw).run()
    sel = CylindricalRDF(water, refgroup="index 0:11", **kw).run()  # the same, as a selection
    edges = reference_edges(30, (0.0, 12.0))
    ref = np.zeros(30, dtype=np.int64)
    first = np.zeros(30, dtype=np.int64)
    for ts in u.trajectory:
        centre = tube.positions.astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(centre[:2], centres[ts.frame], atol=1e-4)
        np.testing.assert_array_equal(r.results.frame_origin[ts.frame], centre)
        ref += reference_counts(water.positions, centre, dims, edges)
        first += reference_counts(water.positions, r.results.frame_origin[0], dims, edges)
    np.testing.assert_array_equal(_counts(r), ref)
    np.testing.assert_array_equal(_counts(sel), ref)
    assert not np.array_equal(ref, first)  # the axis moved: it matters
    assert r.parameters()["refgroup_n_atoms"] == 12


def _cylinder_universe(n, radius, length, dims, centre, n_frames=4, seed=3):
    """`n` atoms uniformly filling a cylinder (along z) of `radius` around `centre`."""
    rng = np.random.default_rng(seed)
    r = radius * np.sqrt(rng.random((n_frames, n)))
    phi = 2 * np.pi * rng.random((n_frames, n))
    z = length * rng.random((n_frames, n))
    coords = np.stack([centre[0] + r * np.cos(phi), centre[1] + r * np.sin(phi), z], axis=-1)
    return make_universe(coords.astype(np.float32), dims)


def _within_noise(g, counts, sigmas=5.0):
    """|g - 1| below `sigmas` Poisson standard deviations of each bin's count."""
    return np.all(np.abs(g - 1.0) < sigmas / np.sqrt(counts)), (g, counts)


def test_uniform_cylinder_gives_one():
    """Atoms uniformly filling a cylinder of radius 10 Å (in a 40 x 40 x 30 Å box):
    density='cylinder' over (0, 10) gives g = 1 within the Poisson noise of each bin, and
    its reference density is the cylinder's N / (pi R^2 L); norm='density' is that
    density; the normalisation written out."""
    n, radius, length = 20000, 10.0, 30.0
    dims = np.array([40.0, 40.0, length, 90, 90, 90])
    u = _cylinder_universe(n, radius, length, dims, (20.0, 20.0))
    kw = {"nbins": 20, "range": (0.0, radius)}
    r = CylindricalRDF(u.atoms, density="cylinder", **kw).run()  # box centre: the axis
    ok, info = _within_noise(r.results.rdf, r.results.count)
    assert ok, info
    rho = n / (np.pi * radius**2 * length)
    assert r.results.rho == pytest.approx(rho, rel=1e-12)  # every atom within the range
    assert r.results.length == pytest.approx(length)
    np.testing.assert_allclose(r.results.coordination[-1], n)
    e = r.results.edges
    shells = np.pi * np.diff(e**2) * length
    np.testing.assert_allclose(r.results.rdf, r.results.count / (4 * shells * rho),
                               rtol=1e-12)
    # an annulus: its own density, the same as the cylinder's
    ring = CylindricalRDF(u.atoms, density="cylinder", nbins=10, range=(4.0, 10.0)).run()
    ok, info = _within_noise(ring.results.rdf, ring.results.count)
    assert ok, info
    assert ring.results.rho == pytest.approx(rho, rel=0.02)
    dens = CylindricalRDF(u.atoms, norm="density", **kw).run()
    np.testing.assert_allclose(dens.results.rdf, r.results.rdf * rho, rtol=1e-12)
    # density='box': relative to N / V of the box, 40 x 40 / (pi 10^2) = 5.09 times more
    box = CylindricalRDF(u.atoms, **kw).run()
    np.testing.assert_allclose(box.results.rdf, r.results.rdf * 1600.0 / (np.pi * radius**2),
                               rtol=1e-6)
    assert box.results.rho == pytest.approx(n / (1600.0 * length), rel=1e-6)


def test_uniform_box_gives_one_with_the_box_density():
    """Atoms filling a hexagonal box: density='box' gives g = 1 around any axis along z
    (also across the periodic boundary, the axis near a corner), its rho is N / V."""
    dims = BOXES["hexagonal"]
    rng = np.random.default_rng(11)
    n = 6000
    u = make_universe(random_positions_in_box(rng, n, dims, n_frames=4), dims)
    r = CylindricalRDF(u.atoms, nbins=10, range=(1.0, 9.0), origin=(1.0, 2.0, 0.0)).run()
    ok, info = _within_noise(r.results.rdf, r.results.count)
    assert ok, info
    area = 22.0 * 22.0 * np.sin(np.radians(120.0))
    assert r.results.rho == pytest.approx(n / (area * 30.0), rel=1e-5)
    e = r.results.edges
    np.testing.assert_allclose(r.results.rdf, r.results.count / (4 * np.pi * np.diff(e**2)
                                                                 * n / area), rtol=1e-5)


def test_no_box_cylinder_along_any_vector():
    """Without a box: a uniform cylinder along a tilted direction, density='cylinder'
    gives 1; norm='density' takes height=; counts against the projected brute force."""
    n, radius, length = 20000, 8.0, 40.0
    u0 = _cylinder_universe(n, radius, length, None, (0.0, 0.0), n_frames=3)
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    # rotate z onto `axis` (Rodrigues), then shift
    zhat = np.array([0.0, 0.0, 1.0])
    v, c = np.cross(zhat, axis), zhat @ axis
    vx = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    rot = np.eye(3) + vx + vx @ vx / (1 + c)
    shift = np.array([5.0, -3.0, 2.0])
    coords = np.stack([ts.positions.astype(np.float64) @ rot.T + shift
                       for ts in u0.trajectory])
    u = make_universe(coords.astype(np.float32), None)
    kw = {"nbins": 16, "range": (0.0, radius), "axis": 3 * axis, "origin": shift}
    r = CylindricalRDF(u.atoms, density="cylinder", **kw).run()
    ok, info = _within_noise(r.results.rdf, r.results.count)
    assert ok, info
    assert "rho" not in r.results  # no L: no box, no height
    edges = reference_edges(16, (0.0, radius))
    ref = sum(reference_counts(u.atoms.positions, shift, None, edges, vector=axis)
              for _ in u.trajectory)
    np.testing.assert_array_equal(_counts(r), ref)
    dens = CylindricalRDF(u.atoms, norm="density", height=length, **kw).run()
    np.testing.assert_allclose(dens.results.rdf, r.results.rdf * n / (np.pi * radius**2
                                                                      * length), rtol=2e-3)


def test_updating_group_of_a_slab():
    """An UpdatingAtomGroup of a slab along the axis: each frame's atoms, and height= the
    slab's: rho is the slab's density."""
    dims = BOXES["ortho"]
    u = _universe(dims, n=600, n_frames=3, seed=2)
    slab = u.select_atoms("prop z > 10 and prop z < 20", updating=True)
    origin = (10.0, 11.0, 0.0)
    r = CylindricalRDF(slab, nbins=20, range=(0.0, 8.0), origin=origin, height=10.0).run()
    edges = reference_edges(20, (0.0, 8.0))
    ref, sizes = 0, []
    for _ in u.trajectory:
        atoms = u.select_atoms("prop z > 10 and prop z < 20")
        sizes.append(len(atoms))
        ref = ref + reference_counts(atoms.positions, origin, dims, edges)
    np.testing.assert_array_equal(_counts(r), ref)
    assert r.results.n_pairs == pytest.approx(np.mean(sizes))
    assert r.results.rho == pytest.approx(np.mean(sizes) / (21.0 * 23.0 * 10.0), rel=1e-6)


@pytest.fixture(scope="module")
def membrane():
    return load_universe("GRO_MEMPROT", "XTC_MEMPROT")


def _make(u):
    return CylindricalRDF(u.select_atoms("name P"), nbins=40, range=(0.0, 40.0),
                          refgroup=u.select_atoms("protein"))


@pytest.mark.parametrize("run_kw", [
    {"backend": "multiprocessing", "n_workers": 2},
    {"backend": "dask", "n_workers": 2},
    {"backend": "node", "n_workers": 2},
    {"blocks": 5},
    {"backend": "multiprocessing", "n_workers": 2, "blocks": 3},
], ids=["multiprocessing", "dask", "node", "blocks", "multiprocessing-blocks"])
def test_every_backend_gives_the_serial_counts(membrane, run_kw):
    """Phosphates around the protein's axis (hexagonal box, 5 frames): every parallel
    backend and blocks give the serial counts, g, rho and axis points, bit for bit; the
    serial counts are the brute force's."""
    if run_kw.get("backend") == "dask":
        pytest.importorskip("dask")
    serial = _make(membrane).run().results
    other = _make(membrane).run(**run_kw).results
    for key in ("count_uint64", "rdf", "cdf", "frame_origin", "frame_plane"):
        np.testing.assert_array_equal(other[key], serial[key])
    assert other.rho == serial.rho
    p, protein = membrane.select_atoms("name P"), membrane.select_atoms("protein")
    edges = reference_edges(40, (0.0, 40.0))
    ref = sum(reference_counts(p.positions, protein.positions.astype(np.float64).mean(axis=0),
                               membrane.dimensions, edges) for _ in membrane.trajectory)
    np.testing.assert_array_equal(serial.count_uint64.astype(np.int64), ref)
    if "blocks" in run_kw:
        b = run_kw["blocks"]
        assert other.block_rdf.shape == (b, 40) and other.block_rho.shape == (b,)
        # the blocks' rho: each block's mean N over its mean cross-section and length
        assert np.all(np.abs(other.block_rho - other.rho) < 0.05 * other.rho)
        assert other.rho_sem >= 0 and np.all(np.isfinite(other.rdf_sem))


def test_block_rho_of_lateral_rdf_is_in_plane(membrane):
    """LateralRDF's block densities are in-plane (Å^-2) as its rho (were 3D)."""
    p = membrane.select_atoms("name P")
    r = LateralRDF(p, p, nbins=10, range=(0.0, 20.0)).run(blocks=2).results
    assert r.block_rho.shape == (2, 2)
    np.testing.assert_allclose(r.block_rho.mean(axis=0), r.rho, rtol=0.1)


def test_save_load_and_plot(tmp_path):
    from mdakit_fastrdf import load

    dims = BOXES["ortho"]
    u = _universe(dims, n=300)
    r = CylindricalRDF(u.atoms, nbins=12, range=(0.0, 9.0), origin=(5, 5, 5),
                       density="cylinder").run()
    for suffix in (".npz", ".csv"):
        data = load(r.save(tmp_path / f"cyl{suffix}"))
        np.testing.assert_allclose(data.results.rdf, r.results.rdf)
        assert data.parameters["density"] == "cylinder"
        assert data.parameters["axis"] == "z" and data.parameters["origin"] == [5, 5, 5]
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ax = r.plot(coordination=True)
    assert ax.lines


def test_command_line(tmp_path, capsys):
    """mdakit-fastrdf cylindrical: declared options, on the demo membrane."""
    datafile("GRO_MEMPROT", "XTC_MEMPROT")  # (skips where the membrane is not carried)
    from mdakit_fastrdf import load
    from mdakit_fastrdf.cli import main

    out = tmp_path / "cyl.csv"
    rc = main(["cylindrical", "--stop", "2", "--refgroup", "protein", "--range", "0", "30",
               "--nbins", "30", "--density", "cylinder", "--no-progress", "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "Axis" in text and "through the centre of --refgroup" in text and "ρ =" in text
    data = load(out)
    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    direct = CylindricalRDF(u.select_atoms("name P"), nbins=30, range=(0.0, 30.0),
                            refgroup=u.select_atoms("protein"), density="cylinder").run(stop=2)
    np.testing.assert_array_equal(data.results.count, direct.results.count)
    with pytest.raises(SystemExit) as exc:
        main(["cylindrical", "--stop", "1", "--origin", "1", "2", "--no-progress"])
    assert exc.value.code == 2
    rc = main(["cylindrical", "--stop", "1", "--origin", "1", "2", "3", "--refgroup",
               "protein", "--no-progress", "-o", str(out)])
    assert rc == 1 and "not both" in capsys.readouterr().err


def test_bad_input(adk_water):
    u = _universe(BOXES["ortho"])
    atoms = u.atoms
    with pytest.raises(ValueError, match="zero length"):
        CylindricalRDF(atoms, axis=(0, 0, 0))
    with pytest.raises(ValueError, match="axis must be"):
        CylindricalRDF(atoms, axis="w")
    with pytest.raises(TypeError, match="axis must be"):
        CylindricalRDF(atoms, axis=object())
    with pytest.raises(ValueError, match="not a lattice plane"):
        CylindricalRDF(atoms, range=(0, 8), axis=(1, 1, 0)).run()
    oblique = _universe(BOXES["oblique"])
    with pytest.raises(ValueError, match="axis='x' needs an orthorhombic box"):
        CylindricalRDF(oblique.atoms, range=(0, 8), axis="x").run()
    tilted = _universe(TILTED)
    with pytest.raises(ValueError, match="vector c is tilted out of the axis"):
        CylindricalRDF(tilted.atoms, range=(0, 8.0)).run()
    with pytest.raises(ValueError, match="vector c is tilted out of the axis"):
        CylindricalRDF(adk_water.atoms[:10], range=(0, 8.0)).run(stop=1)
    with pytest.raises(ValueError, match="empty AtomGroup"):
        CylindricalRDF(atoms[[]])
    with pytest.raises(TypeError, match="atomgroup must be an MDAnalysis AtomGroup"):
        CylindricalRDF(atoms.positions)
    with pytest.raises(ValueError, match="refgroup is an empty AtomGroup"):
        CylindricalRDF(atoms, refgroup=atoms[[]])
    with pytest.raises(ValueError, match="selects no atom"):
        CylindricalRDF(atoms, refgroup="name NOPE")
    with pytest.raises(TypeError, match="refgroup must be an MDAnalysis AtomGroup"):
        CylindricalRDF(atoms, refgroup=3)
    with pytest.raises(ValueError, match="same Universe"):
        CylindricalRDF(atoms, refgroup=_universe(BOXES["ortho"]).atoms)
    with pytest.raises(ValueError, match="not both"):
        CylindricalRDF(atoms, origin=(1, 2, 3), refgroup=atoms[:3])
    with pytest.raises(ValueError, match="origin must be a finite point"):
        CylindricalRDF(atoms, origin=(1, 2))
    with pytest.raises(ValueError, match="origin must be a finite point"):
        CylindricalRDF(atoms, origin=(1, np.nan, 2))
    with pytest.raises(TypeError, match="origin must be a point"):
        CylindricalRDF(atoms, origin="centre")
    with pytest.raises(ValueError, match="density must be one of"):
        CylindricalRDF(atoms, density="bulk")
    with pytest.raises(ValueError, match="height must be a positive"):
        CylindricalRDF(atoms, height=-1.0)
    with pytest.raises(TypeError, match="height must be a length"):
        CylindricalRDF(atoms, height="10")
    with pytest.raises(ValueError, match="choose the centre of refgroup"):
        CylindricalRDF(atoms, center="mass")
    with pytest.raises(ValueError, match="center must be one of"):
        CylindricalRDF(atoms, refgroup=atoms[:3], center="middle")
    with pytest.raises(ValueError, match="has no bonds"):
        CylindricalRDF(atoms, refgroup=atoms[:3], unwrap=True)
    for key, value in (("exclusion_block", (1, 1)), ("exclude_same", "residue"),
                       ("compound", "residues"), ("normal", "z")):
        with pytest.raises(TypeError, match=rf"unexpected keyword argument\(s\) '{key}'"):
            CylindricalRDF(atoms, **{key: value})
    with pytest.raises(TypeError, match="unexpected keyword"):
        CylindricalRDF(atoms, axes="z")
    nobox = _universe(None)
    with pytest.raises(ValueError, match="density='box' needs the box"):
        CylindricalRDF(nobox.atoms, origin=(1, 2, 3)).run()
    with pytest.raises(ValueError, match="centre of the box"):
        CylindricalRDF(nobox.atoms, density="cylinder").run()
    with pytest.raises(ValueError, match="give height="):
        CylindricalRDF(nobox.atoms, norm="density", origin=(1, 2, 3)).run()
    with pytest.warns(UserWarning, match="no atom of the group lies within"):
        r = CylindricalRDF(nobox.atoms, range=(100.0, 101.0), origin=(0, 0, 0),
                           density="cylinder").run()
    assert np.all(np.isnan(r.results.rdf))


def test_half_width_warning():
    u = _universe(BOXES["ortho"])
    with pytest.warns(UserWarning, match="cylindrical RDF is complete only up to 10.5"):
        CylindricalRDF(u.atoms, range=(0.0, 12.0)).run()


def test_which_rdf_page_code_runs(tmp_path, monkeypatch):
    """docs/which_rdf.rst: its CylindricalRDF block runs as written (few frames), and what
    the page says of the figure holds: few lipid atoms within 10 Å of the protein's axis,
    g about 1 from 25 Å on, a little above it."""
    datafile("GRO_MEMPROT", "XTC_MEMPROT")  # (skips where the membrane is not carried)
    from pathlib import Path

    from test_docs import code_blocks, few_frames

    page = Path(__file__).resolve().parents[2] / "docs" / "which_rdf.rst"
    monkeypatch.chdir(tmp_path)
    blocks = [b for b in code_blocks(page.read_text(encoding="utf-8"), page.name)
              if b.language == "python" and "CylindricalRDF(" in b.code]
    assert len(blocks) == 1
    namespace = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(few_frames(blocks[0].code), str(page), "exec"), namespace)  # noqa: S102
    lipids, heads = namespace["lipids"], namespace["heads"]
    bins, g = lipids.results.bins, lipids.results.rdf
    assert g[bins < 10].max() < 0.35
    far = g[bins > 25]
    assert 1.0 <= far.mean() < 1.2 and far.min() > 0.9
    assert heads.results.coordination[-1] > 10
    assert 0 < lipids.results.rho < 0.1


def test_cell_lists_give_the_all_pairs_counts(membrane):
    """The lipid atoms around the membrane protein's axis (hexagonal box): the cell-list
    and all-pairs kernels give the same counts, which are the brute force's."""
    u = membrane
    ow, protein = u.select_atoms("resname POPE POPG"), u.select_atoms("protein")
    kw = {"nbins": 50, "range": (0.0, 10.0), "refgroup": protein}
    counts = {m: _counts(CylindricalRDF(ow, method=m, **kw).run(stop=2))
              for m in ("allpairs", "cells")}
    np.testing.assert_array_equal(counts["cells"], counts["allpairs"])
    edges = reference_edges(50, (0.0, 10.0))
    ref = sum(reference_counts(ow.positions, protein.positions.astype(np.float64).mean(axis=0),
                               u.dimensions, edges) for _ in u.trajectory[:2])
    np.testing.assert_array_equal(counts["cells"], ref)
    assert ref.sum() > 100
