"""Cell-list kernels (``method='cells'``) against the all-pairs kernel and references.

The cell grid only decides which atom pairs are looked at; the distance and the bin come
from the same arithmetic as in the all-pairs kernel. So the counts must be identical to the
all-pairs kernel's in both precisions, for every box, species layout, exclusion labels and
cell size, and, in double precision, equal to an independent float64 brute force and to
MDAnalysis's InterRDF.
"""

import numpy as np
import pytest

import MDAnalysis as mda
from conftest import box_matrix, brute_force_counts, datafile, random_positions_in_box, reference_edges

K = pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")
from mdakit_fastrdf import InterRDF  # noqa: E402
from mdakit_fastrdf.engine import Engine, prepare_box  # noqa: E402

NO_BOX, ORTHO, TRICLINIC, ORTHO_SCALED = 0, 1, 2, 3


def _hist(method, coords, offsets, pairs, edges, kind, box, labels=None, double=False, k=0, order="rowmajor",
          n_threads=2):
    h = K.CpuHistogrammer(n_threads, "", method, k, order)
    pairs = np.ascontiguousarray(pairs, dtype=np.int32).reshape(-1, 2)
    out = np.zeros((len(pairs), len(edges) - 1), dtype=np.uint64)
    h.accumulate(np.ascontiguousarray(coords, dtype=np.float32), np.asarray(offsets, np.int64),
                 pairs, np.ascontiguousarray(edges, dtype=np.float64), kind, box, labels, out,
                 double)
    return out, h


def _box(kind, dims):
    if kind == NO_BOX:
        return None
    return np.ascontiguousarray(box_matrix(dims), dtype=np.float64)


def _random_case(rng):
    """A random frame: box kind and shape, species sizes (0 and 1 included), coordinates
    partly outside the primary cell, r_max from far below to above half the box."""
    kind = int(rng.choice([NO_BOX, ORTHO, TRICLINIC, ORTHO_SCALED]))
    length = float(rng.uniform(15, 45))
    if kind == TRICLINIC:
        dims = [length, length * rng.uniform(0.7, 1.3), length * rng.uniform(0.7, 1.3),
                rng.uniform(50, 130), rng.uniform(50, 130), rng.uniform(50, 130)]
        if not box_matrix(dims).any() or abs(np.linalg.det(box_matrix(dims))) < 1e-3 * length**3:
            dims = [length, length, length, 70.0, 80.0, 100.0]
    else:
        dims = [length, length * 1.1, length * 0.9, 90.0, 90.0, 90.0]
    n_species = int(rng.integers(1, 5))
    sizes = rng.integers(0, 400, n_species)
    if rng.random() < 0.3:
        sizes[0] = int(rng.integers(0, 2))  # an empty or one-atom species
    n = int(sizes.sum())
    frac = rng.uniform(-0.3, 1.3, (n, 3))
    coords = (frac @ box_matrix(dims).astype(np.float64)).astype(np.float32)
    if rng.random() < 0.2 and n > 4:  # duplicate atoms
        coords[n // 2] = coords[0]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pairs = [(a, b) for a in range(n_species) for b in range(a, n_species)]
    rmax = float(rng.uniform(1.5, 0.8 * length))
    edges = reference_edges(int(rng.integers(1, 120)), (0.0, rmax))
    labels = rng.integers(0, 30, n).astype(np.int32) if rng.random() < 0.3 else None
    return kind, dims, coords, offsets, pairs, edges, labels


@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
@pytest.mark.parametrize("angles", [(90.0, 90.0, 90.0), (60.0, 60.0, 90.0), (70.53, 109.47, 70.53)],
                         ids=["ortho", "dodecahedron", "octahedron"])
def test_cells_blocks_with_one_image(angles, double):
    """Periodic boxes: a block of 16 j atoms takes one shift (or none) for every row of a cell
    when the corners of its bounding box of displacements prove it (certify_blocks). Many
    blocks of a wrapped frame at the density of water do (every one in an orthorhombic box);
    with unwrapped atoms (a tenth moved by up to two cells) many do not. The counts equal the
    all-pairs kernel's bit for bit either way (which equals the float64 brute force in double
    precision: test_kernel.py, test_properties.py)."""
    rng = np.random.default_rng(17)
    dims = (50.0, 50.0, 50.0) + angles
    kind = ORTHO if angles == (90.0, 90.0, 90.0) else TRICLINIC
    b = box_matrix(dims)
    n = int(0.0334 * abs(np.linalg.det(b)))
    wrapped = (rng.random((n, 3)) @ b).astype(np.float32)
    unwrapped = wrapped.copy()
    moved = rng.random(n) < 0.1
    unwrapped[moved] += (rng.integers(-2, 3, (int(moved.sum()), 3)) @ b).astype(np.float32)
    offsets, pairs = [0, n // 2, n], [(0, 0), (0, 1), (1, 1)]
    edges = reference_edges(150, (0.0, 6.0))
    for frame, name in ((wrapped, "wrapped"), (unwrapped, "unwrapped")):
        ref, _ = _hist("allpairs", frame, offsets, pairs, edges, kind, _box(kind, dims), double=double)
        got, h = _hist("cells", frame, offsets, pairs, edges, kind, _box(kind, dims), double=double, k=2)
        assert h.last_method == "cells"
        np.testing.assert_array_equal(got, ref, err_msg=name)
        own, shift, zero = h.last_block_images
        if name == "wrapped":
            assert shift > 0 and zero > 0, h.last_block_images
            if kind == ORTHO:
                assert own == 0, h.last_block_images
        else:
            assert own > 0, h.last_block_images
    _, h = _hist("cells", wrapped, offsets, pairs, edges, NO_BOX, None, double=double, k=2)
    assert h.last_block_images == (0, 0, 0)  # no box: nothing to certify


@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_cells_blocks_in_a_compact_dodecahedron(double):
    """A frame wrapped into the rhombic dodecahedron itself (GROMACS's compact unit cell)
    rather than into the parallelepiped of the box vectors: 30 % of the atoms lie outside the
    parallelepiped, so a cell of the grid holds atoms of several lattice images. The grid
    sorts a cell's atoms by image and certifies each run on its own, with the projections
    f[k] . x (TriclinicBox::common_image_projected): most blocks take one image, and the
    counts equal the all-pairs kernel's bit for bit."""
    rng = np.random.default_rng(3)
    b = box_matrix((60.0, 60.0, 60.0, 60.0, 60.0, 90.0)).astype(np.float64)
    n = int(0.0334 * abs(np.linalg.det(b)))
    x = rng.random((n, 3)) @ b
    lattice = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)]) @ b
    cand = x[:, None, :] + lattice[None]
    nearest = np.argmin(((cand - b.sum(0) / 2) ** 2).sum(-1), axis=1)
    compact = cand[np.arange(n), nearest].astype(np.float32)
    frac = compact @ np.linalg.inv(b)
    assert np.mean(np.any((frac < 0) | (frac >= 1), axis=1)) > 0.25
    offsets, pairs = [0, n // 3, n], [(0, 0), (0, 1), (1, 1)]
    edges = reference_edges(150, (0.0, 9.0))
    ref, _ = _hist("allpairs", compact, offsets, pairs, edges, TRICLINIC, np.ascontiguousarray(b),
                   double=double)
    got, h = _hist("cells", compact, offsets, pairs, edges, TRICLINIC, np.ascontiguousarray(b),
                   double=double)
    assert h.last_method == "cells"
    np.testing.assert_array_equal(got, ref)
    own, shift, zero = h.last_block_images
    assert own < shift + zero and shift > 0 and zero > 0, h.last_block_images


@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
@pytest.mark.parametrize("dims", [(32.0, 16.0, 16.0, 90.0, 90.0, 60.0), (24.0, 24.0, 24.0, 60.0, 60.0, 90.0),
                                  (20.0, 20.0, 20.0, 70.53, 109.47, 70.53)],
                         ids=["hexagonal", "dodecahedron", "octahedron"])
def test_cells_blocks_on_half_lattice_ties(dims, double):
    """Triclinic lattices whose pairs sit exactly half a lattice vector apart (the nearest
    image's tie) and one float step either side: blocks whose projections reach such a tie
    keep their own images, the others take one, and every cell side gives the all-pairs
    counts bit for bit."""
    f32 = np.float32
    b = box_matrix(dims).astype(np.float64)
    g = np.stack(np.meshgrid(np.arange(16), np.arange(8), np.arange(8), indexing="ij"), -1).reshape(-1, 3)
    lat = ((g / np.array([16.0, 8.0, 8.0])) @ b).astype(f32)
    nudged = lat.copy()
    nudged[::3] = np.nextafter(nudged[::3], f32(99))
    nudged[1::3] = np.nextafter(nudged[1::3], f32(-99))
    coords = np.concatenate([lat, nudged]).astype(f32)
    offsets, pairs = [0, len(lat), 2 * len(lat)], [(0, 0), (0, 1), (1, 1)]
    edges = reference_edges(200, (0.0, 5.0))
    box = np.ascontiguousarray(b)
    ref, _ = _hist("allpairs", coords, offsets, pairs, edges, TRICLINIC, box, double=double)
    for k in (1, 2, 3):
        got, h = _hist("cells", coords, offsets, pairs, edges, TRICLINIC, box, double=double, k=k)
        np.testing.assert_array_equal(got, ref, err_msg=f"k={k}")
        own, shift, zero = h.last_block_images
        assert own > 0 and shift > 0 and zero > 0, (k, h.last_block_images)


@pytest.mark.slow  # compiles and runs check_projection_bound.cpp
def test_projected_certification_replay(tmp_path):
    """The rounding margins of TriclinicBox::common_image_projected, replayed on the host:
    tests/check_projection_bound.cpp (compiled here against geometry.hpp, without FMA
    contraction) draws random cells and sets of pairs about half a lattice vector apart and
    checks that every certified set gives each pair the certified shift and r2 bit for bit,
    in float and double. Without the margins the same replay finds sets that do not."""
    import os
    import shutil
    import subprocess

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
    exe = tmp_path / "check"
    subprocess.run([cxx, "-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math",
                    "-I", os.path.join(tests, "..", "csrc", "include"),
                    os.path.join(tests, "check_projection_bound.cpp"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), "300000"], check=True, capture_output=True, text=True).stdout
    res = {tuple(line.split()[:2]): tuple(map(int, line.split()[2:])) for line in out.splitlines()}
    for prec in ("float", "double"):
        bad, certified = res[(prec, "margin")]
        assert certified > 1000 and bad == 0, (prec, res)
        bad, certified = res[(prec, "nomargin")]
        assert bad > 0, (prec, res)


@pytest.mark.parametrize("seed", range(40))
def test_cells_identical_to_allpairs_random(seed):
    """Random frames: identical counts in single and double precision for cell sides
    r_max, r_max/2 and r_max/3."""
    rng = np.random.default_rng(1000 + seed)
    kind, dims, coords, offsets, pairs, edges, labels = _random_case(rng)
    box = _box(kind, dims)
    for double in (False, True):
        ref, _ = _hist("allpairs", coords, offsets, pairs, edges, kind, box, labels, double)
        for k, order in ((1, "rowmajor"), (2, "rowmajor"), (3, "rowmajor"), (2, "morton"),
                         (1, "hilbert"), (3, "hilbert")):
            got, h = _hist("cells", coords, offsets, pairs, edges, kind, box, labels, double, k, order)
            assert h.last_method == "cells"
            np.testing.assert_array_equal(got, ref, err_msg=f"k={k} {order} double={double} kind={kind}")


@pytest.mark.parametrize("kind", [NO_BOX, ORTHO, TRICLINIC])
def test_cells_equal_float64_bruteforce(kind):
    """Double precision cell lists equal an independent float64 brute force over periodic
    images, for a species with itself and two different species."""
    rng = np.random.default_rng(7)
    dims = {NO_BOX: None, ORTHO: (31.0, 33.0, 35.0, 90.0, 90.0, 90.0),
            TRICLINIC: (34.0, 36.0, 38.0, 60.0, 75.0, 100.0)}[kind]
    n0, n1 = 700, 500
    if dims is None:
        coords = (rng.random((n0 + n1, 3)) * 40.0).astype(np.float32)
    else:
        coords = random_positions_in_box(rng, n0 + n1, dims)[0]
    offsets = np.array([0, n0, n0 + n1], np.int64)
    edges = reference_edges(60, (0.0, 7.5))
    got, h = _hist("cells", coords, offsets, [(0, 0), (0, 1), (1, 1)], edges, kind,
                   _box(kind, dims), double=True)
    assert h.last_method == "cells"
    assert np.prod(h.last_plan["cells"]) > 27  # the grid really prunes pairs
    p0, p1 = coords[:n0], coords[n0:]
    np.testing.assert_array_equal(got[0].astype(np.int64),
                                  brute_force_counts(p0, p0, dims, edges, mdanalysis_path=False))
    np.testing.assert_array_equal(got[1].astype(np.int64),
                                  brute_force_counts(p0, p1, dims, edges, mdanalysis_path=False))
    np.testing.assert_array_equal(got[2].astype(np.int64),
                                  brute_force_counts(p1, p1, dims, edges, mdanalysis_path=False))


@pytest.mark.parametrize("kind", [ORTHO, TRICLINIC])
def test_pairs_exactly_at_rmax_and_across_the_boundary(kind):
    """Pairs exactly r_max apart, straddling the periodic boundary, and on cell faces are
    counted (the last bin is closed) exactly as the all-pairs kernel counts them."""
    dims = (30.0, 30.0, 30.0, 90.0, 90.0, 90.0) if kind == ORTHO else (30.0, 30.0, 30.0, 60.0, 60.0, 90.0)
    b = box_matrix(dims).astype(np.float64)
    rmax = 6.0
    pts = []
    for base in ([0.0, 0.0, 0.0], [29.0, 15.0, 15.0], [15.0, 15.0, 15.0], [7.5, 7.5, 7.5]):
        base = np.array(base)
        pts.append(base)
        for axis in range(3):
            d = np.zeros(3)
            d[axis] = rmax
            pts.append(base + d)
            pts.append(base - d)
    coords = np.array(pts, dtype=np.float32)
    coords = np.concatenate([coords, coords @ np.eye(3, dtype=np.float32) + b[0].astype(np.float32)])
    offsets = np.array([0, len(coords)], np.int64)
    edges = reference_edges(12, (0.0, rmax))
    for double in (False, True):
        ref, _ = _hist("allpairs", coords, offsets, [(0, 0)], edges, kind, _box(kind, dims), double=double)
        for k in (1, 2, 3):
            got, _ = _hist("cells", coords, offsets, [(0, 0)], edges, kind, _box(kind, dims), double=double, k=k)
            np.testing.assert_array_equal(got, ref)
        assert ref[0, -1] > 0  # pairs at exactly r_max are in the last bin


def test_sparse_system_without_box_keeps_the_grid_small():
    """Two distant clusters without a box: the grid is capped near the atom count instead
    of covering the empty space with tiny cells, and the counts are right."""
    rng = np.random.default_rng(3)
    a = rng.random((300, 3)) * 10.0
    b = rng.random((300, 3)) * 10.0 + 1.0e5
    coords = np.concatenate([a, b]).astype(np.float32)
    offsets = np.array([0, 600], np.int64)
    edges = reference_edges(20, (0.0, 2.0))
    ref, _ = _hist("allpairs", coords, offsets, [(0, 0)], edges, NO_BOX, None)
    got, h = _hist("cells", coords, offsets, [(0, 0)], edges, NO_BOX, None)
    assert np.prod(h.last_plan["cells"]) <= 2 * 600 + 64
    np.testing.assert_array_equal(got, ref)


def test_thread_count_does_not_change_cell_counts():
    rng = np.random.default_rng(5)
    coords = random_positions_in_box(rng, 3000, (40.0, 40.0, 40.0, 90.0, 90.0, 90.0))[0]
    offsets = np.array([0, 1000, 3000], np.int64)
    edges = reference_edges(50, (0.0, 9.0))
    box = _box(ORTHO, (40.0, 40.0, 40.0, 90.0, 90.0, 90.0))
    outs = [_hist("cells", coords, offsets, [(0, 0), (0, 1), (1, 1)], edges, ORTHO, box,
                  n_threads=t)[0] for t in (1, 2, 3)]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_auto_chooses_by_work():
    """'auto' takes cell lists for a large box with a short r_max, all pairs when r_max
    reaches across the box (no pruning possible) or the system is tiny."""
    rng = np.random.default_rng(9)
    dims = (60.0, 60.0, 60.0, 90.0, 90.0, 90.0)
    coords = random_positions_in_box(rng, 6000, dims)[0]
    offsets = np.array([0, 6000], np.int64)
    box = _box(ORTHO, dims)
    _, h = _hist("auto", coords, offsets, [(0, 0)], reference_edges(50, (0.0, 8.0)), ORTHO, box)
    assert h.last_method == "cells"
    _, h = _hist("auto", coords, offsets, [(0, 0)], reference_edges(50, (0.0, 29.0)), ORTHO, box)
    assert h.last_method == "allpairs"
    _, h = _hist("auto", coords[:20], np.array([0, 20], np.int64), [(0, 0)],
                 reference_edges(50, (0.0, 8.0)), ORTHO, box)
    assert h.last_method == "allpairs"


def test_method_validated():
    with pytest.raises(ValueError, match="method"):
        K.CpuHistogrammer(1, "", "grid", 2)
    with pytest.raises(ValueError, match="cell_k"):
        K.CpuHistogrammer(1, "", "cells", -1)
    with pytest.raises(ValueError, match="cell_k"):
        K.CpuHistogrammer(1, "", "cells", 9)
    with pytest.raises(ValueError, match="cell_order"):
        K.CpuHistogrammer(1, "", "cells", 2, "peano")
    with pytest.raises(ValueError, match="method"):
        Engine("cpu", method="neighbours")
    u = mda.Universe(*datafile("GRO"))
    with pytest.raises(ValueError, match="method"):
        InterRDF(u.atoms[:10], u.atoms[:10], method="fast")


@pytest.mark.slow  # about 7 s
def test_adk_water_cells_equal_mdanalysis_in_double(adk_water):
    """adk in water (triclinic box), OW-OW with exclusion_block=(1, 1), first frame:
    method='cells' in double precision gives MDAnalysis InterRDF's counts exactly, and
    'auto' takes the cell lists here."""
    from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

    ow = adk_water.select_atoms("name OW")
    ref = MDAInterRDF(ow, ow, nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1)).run(stop=1)
    for method in ("cells", "auto"):
        r = InterRDF(ow, ow, nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1),
                     precision="double", method=method, device="cpu").run(stop=1)
        np.testing.assert_array_equal(r.results.count, ref.results.count)
        np.testing.assert_allclose(r.results.rdf, ref.results.rdf, rtol=1e-12)
        assert r._engine.last_method == "cells"


def test_adk_protein_water_cells_equal_allpairs_single(adk_water):
    """Two different groups (protein heavy atoms vs water O), single precision: cells and
    all pairs agree bit for bit."""
    g1 = adk_water.select_atoms("protein and not name H*")
    g2 = adk_water.select_atoms("name OW")
    kw = dict(nbins=120, range=(2.0, 12.0), device="cpu")
    a = InterRDF(g1, g2, method="allpairs", **kw).run(stop=2)
    c = InterRDF(g1, g2, method="cells", **kw).run(stop=2)
    np.testing.assert_array_equal(a.results.count_uint64, c.results.count_uint64)
    assert c._engine.last_method == "cells"


def test_box_free_cells_match_mdanalysis(fresh_adk_vacuum):
    """A trajectory without a box (PSF/DCD of adk in vacuum has a box of zeros in some
    readers; here a box-free copy): method='cells' equals MDAnalysis with norm='density'."""
    from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

    u = fresh_adk_vacuum  # its own: the box is set to None
    ca = u.select_atoms("name CA")
    heavy = u.select_atoms("not name H*")
    u.dimensions = None
    for ts in u.trajectory[:3]:
        assert prepare_box(ts.dimensions).kind == NO_BOX
    ref = MDAInterRDF(ca, heavy, nbins=50, range=(0.0, 8.0), norm="density").run(stop=3)
    got = InterRDF(ca, heavy, nbins=50, range=(0.0, 8.0), norm="density", precision="double",
                   method="cells", device="cpu").run(stop=3)
    np.testing.assert_array_equal(got.results.count, ref.results.count)
