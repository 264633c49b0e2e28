"""StructureFactor: periodic S(q) from the partial histograms, joined to a direct k-space sum.

References, each computed independently of the code under test:

* freud's ``StaticStructureFactorDirect`` (the direct route on the same frames and q bins)
  and ``StaticStructureFactorDebye`` (the transform, once the pairs beyond r_max and the
  uniform background it does not subtract are accounted for by a NumPy pair sum);
* a NumPy transform of MDAnalysis InterRDF's g(r);
* float64 NumPy sums over atoms: the amplitudes A_a(k) (``_np_amplitudes``, also the
  stand-in of the compiled k-space engine until ``mdakit_fastrdf.engine.kspace`` exists)
  and the weighted X-ray sum |sum_j f_j exp(i k r_j)|^2;
* statistics of an ideal gas (S = 1 within the standard error derived below).
"""

import importlib
import sys
import types

import MDAnalysis as mda
import numpy as np
import pytest
from conftest import box_matrix, make_universe, random_positions_in_box, requires_gpu

from mdakit_fastrdf.analysis.structure_factor import (
    StructureFactor,
    bhatia_thornton,
    lorch_window,
)

# -- the k-space sums in NumPy ---------------------------------------------------------------


def np_reciprocal_vectors(box_vectors, q_max, q_min=0.0):
    """Integer n (M, 3) of k = 2 pi n @ inv(B).T with q_min < |k| <= q_max, one of each
    +-k (the first nonzero component of n positive), sorted by |k|; and |k|."""
    b = np.asarray(box_vectors, dtype=np.float64)
    recip = 2.0 * np.pi * np.linalg.inv(b).T  # rows 2 pi a*, 2 pi b*, 2 pi c*
    lim = [int(np.floor(q_max * np.linalg.norm(b[i]) / (2.0 * np.pi))) + 1 for i in range(3)]
    grids = np.meshgrid(*[np.arange(-m, m + 1) for m in lim], indexing="ij")
    n = np.stack([g.ravel() for g in grids], axis=1)
    first = np.where(n[:, 0] != 0, n[:, 0], np.where(n[:, 1] != 0, n[:, 1], n[:, 2]))
    n = n[first > 0]
    kmag = np.linalg.norm(n @ recip, axis=1)
    keep = (kmag > q_min) & (kmag <= q_max)
    n, kmag = n[keep], kmag[keep]
    order = np.lexsort((n[:, 2], n[:, 1], n[:, 0], kmag))
    return n[order].astype(np.int32), kmag[order]


def _np_amplitudes(positions, offsets, box_vectors, n):
    """A_a(k) = sum_{j in a} exp(i k . r_j), float64, (n_species, M)."""
    k = 2.0 * np.pi * np.asarray(n, dtype=np.float64) @ np.linalg.inv(
        np.asarray(box_vectors, dtype=np.float64)).T
    pos = np.asarray(positions, dtype=np.float64)
    out = np.empty((len(offsets) - 1, len(k)), dtype=np.complex128)
    for s in range(len(offsets) - 1):
        phase = pos[offsets[s]:offsets[s + 1]] @ k.T
        out[s] = np.exp(1j * phase).sum(axis=0)
    return out


class NumpyKSpaceEngine:
    """The k-space engine's interface in NumPy (test stand-in and reference)."""

    def __init__(self, device="auto", n_threads=None):
        self.device = device

    def amplitudes(self, positions, offsets, box_vectors, n):
        return _np_amplitudes(positions, offsets, box_vectors, n)


def _real_kspace():
    """The compiled k-space engine, if this build has one that runs (checked against the
    NumPy sum on a few atoms)."""
    try:
        mod = importlib.import_module("mdakit_fastrdf.engine.kspace")
        box = np.diag([10.0, 11.0, 12.0])
        pos = np.random.default_rng(0).random((7, 3)) * 10
        n, _ = mod.reciprocal_vectors(box, 2.0)
        offsets = np.array([0, 3, 7], dtype=np.int64)
        amp = mod.KSpaceEngine(device="cpu").amplitudes(pos, offsets, box, n)
        if not np.allclose(amp, _np_amplitudes(pos, offsets, box, n), atol=1e-9):
            return None
    except (ImportError, AttributeError, TypeError, ValueError, RuntimeError):
        return None
    return mod


@pytest.fixture
def kspace(monkeypatch):
    """The compiled k-space engine when it exists, else the NumPy stand-in (installed as
    ``mdakit_fastrdf.engine.kspace`` for this test; forked workers inherit it)."""
    real = _real_kspace()
    if real is not None:
        return real
    fake = types.ModuleType("mdakit_fastrdf.engine.kspace")
    fake.reciprocal_vectors = np_reciprocal_vectors
    fake.KSpaceEngine = NumpyKSpaceEngine
    monkeypatch.setitem(sys.modules, "mdakit_fastrdf.engine.kspace", fake)
    return fake


# -- systems ---------------------------------------------------------------------------------


def hard_sphere_positions(rng, n, length, diameter):
    """n points in a periodic cube of side `length`, no two closer than `diameter`
    (random sequential addition): a liquid-like structure with a main peak."""
    pts = np.empty((n, 3))
    m = 0
    while m < n:
        p = rng.random(3) * length
        d = pts[:m] - p
        d -= length * np.round(d / length)
        if m == 0 or np.min(np.einsum("ij,ij->i", d, d)) >= diameter * diameter:
            pts[m] = p
            m += 1
    return pts.astype(np.float32)


@pytest.fixture(scope="module")
def liquid():
    """Two species (A: 300, B: 200) of hard spheres, cube of 22 Å, 3 frames."""
    rng = np.random.default_rng(5)
    length, n = 22.0, 500
    coords = np.stack([hard_sphere_positions(rng, n, length, 2.2) for _ in range(3)])
    names = ["A"] * 300 + ["B"] * 200
    u = make_universe(coords, [length, length, length, 90, 90, 90], names=names)
    u.add_TopologyAttr("elements", ["O"] * 300 + ["Na"] * 200)
    return u


@pytest.fixture(scope="module")
def gas():
    """An ideal gas: 800 uniform random atoms in a 24 Å cube, 6 frames."""
    rng = np.random.default_rng(17)
    dims = np.array([24.0, 24.0, 24.0, 90, 90, 90])
    coords = random_positions_in_box(rng, 800, dims, n_frames=6)
    return make_universe(coords, dims)


def _edges_centres(q_range, qbins):
    edges = np.linspace(q_range[0], q_range[1], qbins + 1)
    return edges, 0.5 * (edges[:-1] + edges[1:])


# -- the transform ---------------------------------------------------------------------------


def _np_window(name, r, rmax, width=None):
    """The windows written out: Lorch's sin(x)/x, x = pi r / r_max; the cosine taper 1 up to
    r_max - w, then (1 + cos(pi (r - r_max + w) / w)) / 2."""
    if name == "lorch":
        return np.sin(np.pi * r / rmax) / (np.pi * r / rmax)
    width = rmax / 2 if width is None else width
    start = rmax - width
    return np.where(r <= start, 1.0, 0.5 * (1.0 + np.cos(np.pi * (r - start) / width)))


@pytest.mark.parametrize("window, width", [("cosine", None), ("lorch", None),
                                           ("cosine", 1.5)])
def test_transform_matches_numpy_transform_of_interrdf(liquid, window, width):
    """One species: S(q) - 1 = rho (1 - 1/N) sum_k V_k (g_k - 1) W_k sinc(q r_k) with
    MDAnalysis's g(r) (self pairs excluded), to rounding, for each window (the cosine one,
    the default, with its default width r_max / 2 and with another). r_max <= 0.3 box
    lengths, where MDAnalysis takes its grid search and its counts are ours exactly."""
    from MDAnalysis.analysis.rdf import InterRDF

    a = liquid.select_atoms("name A")
    rmax, nbins = 6.5, 650
    kw = {} if window == "cosine" and width is None else {"window": window,
                                                          "taper_width": width}
    sf = StructureFactor(a, by="name", nbins=nbins, range=(0.0, rmax), q_range=(0.0, 12.0),
                         qbins=60, q_crossover=None, **kw).run()
    mda_rdf = InterRDF(a, a, nbins=nbins, range=(0.0, rmax), exclusion_block=(1, 1)).run()
    g, edges = mda_rdf.results.rdf, mda_rdf.results.edges
    r = 0.5 * (edges[:-1] + edges[1:])
    shell = 4.0 / 3.0 * np.pi * np.diff(edges ** 3)
    n = len(a)
    rho = n / np.mean([ts.volume for ts in liquid.trajectory])
    q = sf.results.q
    w = _np_window(window, r, rmax, width)
    sinc = np.sin(np.outer(q, r)) / np.outer(q, r)
    ref = 1.0 + rho * (1.0 - 1.0 / n) * (sinc @ (shell * (g - 1.0) * w))
    assert np.array_equal(sf.results.count[0], mda_rdf.results.count)
    np.testing.assert_allclose(sf.results.s, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(sf.results.partials[0], ref, rtol=0, atol=1e-10)


def _min_image_distances(pos, length):
    d = pos[:, None, :].astype(np.float64) - pos[None, :, :]
    d -= length * np.round(d / length)
    dist = np.sqrt((d * d).sum(-1))
    return dist[~np.eye(len(pos), dtype=bool)]


def test_transform_against_freud_debye(liquid):
    """freud's Debye S(k) = (1/N) sum_ij sinc(k r_ij) over every minimum-image pair, with no
    background subtracted. Without a window our transform is
    1 + (1/N) sum_{r_ij < r_max} sinc - (N-1)/V int_0^r_max 4 pi r^2 sinc dr (bin-centre
    quadrature); so freud - ours = (1/N) sum_{r_ij >= r_max} sinc + (N-1)/V * that integral.
    Both terms are computed here in NumPy; the remainder is the quadrature of the bins,
    about (q dr)^2/24 of each pair's term: with dr = 0.005 Å and q <= 8, <= 7e-5 relative."""
    freud = pytest.importorskip("freud")
    length, rmax = 22.0, 11.0
    ag = liquid.atoms
    q_range, qbins = (1.0, 8.0), 35
    sf = StructureFactor(ag, by=lambda g: np.zeros(len(g), int), nbins=2200,
                         range=(0.0, rmax), q_range=q_range, qbins=qbins, window=None,
                         q_crossover=None).run()
    q = sf.results.q
    n = len(ag)
    box = freud.box.Box.cube(length)
    debye = freud.diffraction.StaticStructureFactorDebye(num_k_values=qbins, k_max=q[-1],
                                                        k_min=q[0])
    tail = np.zeros_like(q)
    background = np.zeros_like(q)
    for k, ts in enumerate(liquid.trajectory):
        debye.compute((box, ts.positions.copy()), reset=(k == 0))
        dist = _min_image_distances(ts.positions, length)
        far = dist[dist >= rmax]
        tail += np.sin(np.outer(q, far)).dot(1.0 / far) / q / n
        r = np.linspace(0, rmax, 200001)
        integrand = 4 * np.pi * r ** 2 * np.sinc(np.outer(q, r) / np.pi)
        background += (n - 1) / ts.volume * np.trapezoid(integrand, r, axis=1)
    liquid.trajectory[0]
    nf = len(liquid.trajectory)
    np.testing.assert_allclose(debye.k_values, q, rtol=1e-6)
    expected = debye.S_k - tail / nf - background / nf
    np.testing.assert_allclose(sf.results.s, expected, rtol=0, atol=2e-3)


def test_high_q_tends_to_one(liquid):
    sf = StructureFactor(liquid.atoms, by="name", nbins=2200, range=(0.0, 11.0),
                         q_range=(12.0, 20.0), qbins=16, q_crossover=None).run()
    assert np.all(np.abs(sf.results.s - 1.0) < 0.03)
    assert np.all(np.abs(sf.results.partials - 1.0) < 0.1)


# -- the direct route --------------------------------------------------------------------------


def _octant_vectors(length, q_max):
    """The reciprocal vectors of a cube with n1, n2, n3 >= 0, not all 0, |k| <= q_max."""
    m = int(q_max * length / (2 * np.pi)) + 1
    g = np.arange(0, m + 1)
    n = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)[1:]
    k = 2 * np.pi * n / length
    return k[np.linalg.norm(k, axis=1) <= q_max]


def test_freud_direct_takes_the_positive_octant():
    """What freud's direct S(k) averages: two atoms, S(k) = 1 + cos(k . d), so every bin
    says which vectors it holds. freud 3.4 takes the vectors with n1, n2, n3 >= 0 (a quarter
    of the independent vectors in a cube); we take them all (one of each +-k)."""
    freud = pytest.importorskip("freud")
    length, d = 22.0, np.array([1.3, 0.4, 0.2])
    sf = freud.diffraction.StaticStructureFactorDirect(bins=15, k_max=3.0, k_min=0)
    sf.compute((freud.box.Box.cube(length), np.array([[0, 0, 0], d], dtype=np.float32)))
    edges = np.linspace(0, 3.0, 16)
    k = _octant_vectors(length, 3.0)
    ib = np.searchsorted(edges, np.linalg.norm(k, axis=1), side="right") - 1
    with np.errstate(invalid="ignore"):
        ref = np.bincount(ib, 1 + np.cos(k @ d), 15) / np.bincount(ib, minlength=15)
    np.testing.assert_allclose(sf.S_k[1:], ref[1:], rtol=1e-4)


def _freud_direct_vectors(box_vectors, k_max):
    """The integer n of the vectors freud 3.4's StaticStructureFactorDirect averages (all
    of them: num_sampled_k_points=0, k_min=0), written from its source
    (freud/diffraction/StaticStructureFactorDirect.cc, reciprocal_isotropic) in float32 as
    it computes: k = 2 pi (n1 a* + n2 b* + n3 c*) with 0 <= n_i < ceil(k_max / |2 pi a_i*|)
    and |k| <= k_max, n3 running from 0 (its lower bound is the root of a quadratic with a
    negative discriminant: NaN, cast to 0) to below ceil(kz), kz the larger root of
    |k_xy - kz 2 pi c*| = k_max. That root has the sign of k_xy . c* reversed (k_xy - kz c*
    where the vector is k_xy + kz c*), so where k_xy . c* < 0 the loop stops short of the
    sphere, and a negative root wraps to a large unsigned number (the loop then runs to
    its cap). In a cube k_xy . c* = 0 and the set is the whole octant; in a triclinic box it
    is a part of it."""
    f32 = np.float32
    h = np.asarray(box_vectors, dtype=np.float32)
    recip = np.linalg.inv(h.astype(np.float64).T).astype(np.float32)  # rows a*, b*, c*
    two_pi = f32(2 * np.pi)
    q_max = f32(k_max) / two_pi
    limit = np.ceil(q_max / np.linalg.norm(recip.astype(np.float64), axis=1).astype(
        np.float32)).astype(int)
    bx, by, bz = (two_pi * recip[i] for i in range(3))
    a = f32(np.dot(bz, bz))
    out = []
    for n1 in range(limit[0]):
        for n2 in range(limit[1]):
            kxy = f32(n1) * bx + f32(n2) * by
            half_b = f32(-2) * f32(np.dot(kxy, bz)) / (f32(2) * a)
            c_max = f32(np.dot(kxy, kxy)) - f32(k_max) * f32(k_max)
            with np.errstate(invalid="ignore"):
                root = np.ceil(-half_b + np.sqrt(half_b * half_b - c_max / a))
            top = 0 if np.isnan(root) else int(root) % 2 ** 32  # float -> unsigned, x86-64
            for n3 in range(min(top, limit[2])):
                k = kxy + f32(n3) * bz
                if f32(np.dot(k, k)) / two_pi / two_pi <= q_max * q_max:
                    out.append((n1, n2, n3))
    return np.array(out, dtype=np.int32).reshape(-1, 3)


def test_freud_direct_vectors_triclinic(kspace):
    """freud's direct S(k) in a triclinic box (the rhombic dodecahedron of the adk system,
    30 Å) is the mean of |A(k)|^2/N over the vectors _freud_direct_vectors gives: our
    amplitudes on exactly those vectors reproduce it to its float32 rounding (1e-6
    measured), over frames and bins. And that set misses part of the octant n >= 0 (more as
    k grows): freud's bins hold fewer vectors than the octant's, under a quarter of ours
    (every vector), so its bins carry more sampling noise."""
    freud = pytest.importorskip("freud")
    dims = np.array([30.0, 30.0, 30.0, 60.0, 60.0, 90.0])
    rng = np.random.default_rng(3)
    coords = random_positions_in_box(rng, 400, dims, n_frames=3)
    box_vectors = box_matrix(dims, np.float64)
    k_max, bins = 3.0, 30
    edges = np.linspace(0.0, k_max, bins + 1)
    n = _freud_direct_vectors(box_vectors, k_max)
    n = n[np.any(n != 0, axis=1)]  # freud's k = 0 sits in its first bin: S = N
    kmag = np.linalg.norm(2 * np.pi * n @ np.linalg.inv(box_vectors).T, axis=1)
    ib = np.searchsorted(edges, kmag, side="right") - 1
    engine = kspace.KSpaceEngine(device="cpu")
    direct = freud.diffraction.StaticStructureFactorDirect(bins=bins, k_max=k_max, k_min=0)
    fbox = freud.box.Box.from_matrix(box_vectors.T)
    total = np.zeros(bins)
    for f, pos in enumerate(coords):
        direct.compute((fbox, pos.copy()), reset=(f == 0))
        amp = engine.amplitudes(pos, np.array([0, len(pos)]), box_vectors, n)[0]
        total += np.bincount(ib, np.abs(amp) ** 2 / len(pos), bins)
    count = np.bincount(ib, minlength=bins)
    held = count > 0
    assert held[4:].all()
    mine = total[held] / (count[held] * len(coords))
    np.testing.assert_allclose(direct.S_k[held], mine, rtol=1e-5, atol=1e-6)
    # the set is a part of the octant n >= 0, and of every vector (ours)
    n_all, k_all = kspace.reciprocal_vectors(box_vectors, q_max=k_max)
    octant = np.all(n_all >= 0, axis=1)
    assert {tuple(v) for v in n} < {tuple(v) for v in n_all[octant]}
    per_bin_octant = np.histogram(k_all[octant], bins=edges)[0]
    per_bin_all = np.histogram(k_all, bins=edges)[0]
    assert count[-1] < 0.5 * per_bin_octant[-1]
    assert np.all(count[1:] <= per_bin_octant[1:])
    assert count[1:].sum() < 0.25 * per_bin_all[1:].sum()


def test_direct_against_freud_direct(liquid, kspace):
    """Below the crossover S(q) is a direct sum like freud's, on the same frames and bins,
    over more vectors (all, where freud takes the positive octant: test above): per bin
    the two means of |A(k)|^2/N differ by their sampling only. Each vector's value has a
    spread of about S (exponential statistics), so they agree within
    5 S sqrt(1/M_freud + 1/M_ours) / sqrt(frames)."""
    freud = pytest.importorskip("freud")
    length = 22.0
    q_range, qbins = (0.0, 3.0), 15
    sf = StructureFactor(liquid.atoms, by=lambda g: np.zeros(len(g), int), nbins=1000,
                         range=(0.0, 10.0), q_range=q_range, qbins=qbins,
                         q_crossover=10.0).run()
    direct = freud.diffraction.StaticStructureFactorDirect(bins=qbins, k_max=q_range[1],
                                                          k_min=q_range[0])
    box = freud.box.Box.cube(length)
    for k, ts in enumerate(liquid.trajectory):
        direct.compute((box, ts.positions.copy()), reset=(k == 0))
    nf = len(liquid.trajectory)
    liquid.trajectory[0]
    np.testing.assert_allclose(direct.bin_centers, sf.results.q, rtol=1e-6)
    ours = sf.results.s
    kmag = np.linalg.norm(_octant_vectors(length, q_range[1]), axis=1)
    m_freud = np.histogram(kmag, bins=sf.results.q_edges)[0]
    m_ours = sf.results.n_kvectors
    both = (m_freud > 0) & (m_ours > 0)
    assert both.sum() == qbins - 1  # the first bin (below 2 pi / L) holds no vector
    assert np.isnan(ours[0])  # freud's first bin holds k = 0 (S = N)
    tol = 5 * ours[both] * np.sqrt(1 / m_freud[both] + 1 / m_ours[both]) / np.sqrt(nf)
    assert np.all(np.abs(ours[both] - direct.S_k[both]) < tol)
    # and the two agree on the octant's vectors exactly: our k-space engine on them
    ts = liquid.trajectory[0]
    box_vectors = ts.triclinic_dimensions.astype(np.float64)
    n_oct = np.rint(_octant_vectors(length, q_range[1]) * length / (2 * np.pi)).astype(
        np.int32)
    pos = liquid.atoms.positions
    amp = kspace.KSpaceEngine(device="cpu").amplitudes(
        pos, np.array([0, len(pos)], dtype=np.int64), box_vectors, n_oct)[0]
    single = freud.diffraction.StaticStructureFactorDirect(bins=qbins, k_max=q_range[1],
                                                          k_min=q_range[0])
    single.compute((box, pos.copy()))
    ib = np.searchsorted(sf.results.q_edges, np.linalg.norm(n_oct, axis=1)
                         * 2 * np.pi / length, side="right") - 1
    with np.errstate(invalid="ignore"):
        mine = (np.bincount(ib, np.abs(amp) ** 2 / len(pos), qbins)
                / np.bincount(ib, minlength=qbins))
    np.testing.assert_allclose(mine[1:], single.S_k[1:], rtol=1e-3, atol=1e-4)


def test_direct_partials_against_numpy_pair_sum(liquid, kspace):
    """Faber-Ziman partials from the amplitudes = N/(N_a N_b) <sum_{i in a, j in b, i != j}
    cos(k . r_ij)> + 1, summed over atom pairs in NumPy."""
    q_range, qbins = (0.0, 1.6), 4
    sf = StructureFactor(liquid.atoms, by="name", nbins=1000, range=(0.0, 10.0),
                         q_range=q_range, qbins=qbins, q_crossover=10.0).run(stop=2)
    res = sf.results
    edges = res.q_edges
    sums = np.zeros((3, qbins))
    counts = np.zeros(qbins)
    for ts in liquid.trajectory[:2]:
        box = ts.triclinic_dimensions.astype(np.float64)
        n, kmag = np_reciprocal_vectors(box, edges[-1], edges[0])
        kvec = 2 * np.pi * n @ np.linalg.inv(box).T
        ib = np.searchsorted(edges, kmag, side="right") - 1
        groups = {lab: liquid.select_atoms(f"name {lab}").positions.astype(np.float64)
                  for lab in ("A", "B")}
        for p, (la, lb) in enumerate([("A", "A"), ("A", "B"), ("B", "B")]):
            xa, xb = groups[la], groups[lb]
            for m, k in enumerate(kvec):
                ca = np.cos(xa @ k)
                sa = np.sin(xa @ k)
                cb = np.cos(xb @ k)
                sb = np.sin(xb @ k)
                total = ca.sum() * cb.sum() + sa.sum() * sb.sum()  # sum_ij cos(k r_ij)
                if la == lb:
                    total -= len(xa)  # i == j
                sums[p, ib[m]] += total
                if p == 0:
                    counts[ib[m]] += 1
    liquid.trajectory[0]
    n_a = {"A": 300, "B": 200}
    assert list(res.species) == ["A", "B"]
    for p, (la, lb) in enumerate([("A", "A"), ("A", "B"), ("B", "B")]):
        k = int(np.flatnonzero([tuple(res.species[i] for i in pr) == (la, lb)
                                for pr in res.pairs])[0])
        with np.errstate(invalid="ignore", divide="ignore"):
            ref = 1.0 + 500.0 / (n_a[la] * n_a[lb]) * sums[p] / counts
        np.testing.assert_allclose(res.partials[k], ref, rtol=1e-4, atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(res.n_kvectors, counts / 2)


def test_xray_total_against_weighted_amplitude(liquid, kspace):
    """X-ray total S(k) = 1 + (|sum_j f_j exp(i k r_j)|^2 / N - <f^2>) / <f>^2 (from the
    Faber-Ziman definition), with f from periodictable directly."""
    from periodictable.cromermann import fxrayatq

    q_range, qbins = (0.0, 1.6), 4
    sf = StructureFactor(liquid.atoms, nbins=1000, range=(0.0, 10.0), q_range=q_range,
                         qbins=qbins, weights="xray", q_crossover=10.0).run(stop=2)
    res = sf.results
    edges = res.q_edges
    num = np.zeros(qbins)
    counts = np.zeros(qbins)
    fq = {el: np.array([fxrayatq(el, qq) for qq in res.q]) for el in ("O", "Na")}
    elements = np.array(["O"] * 300 + ["Na"] * 200)
    for ts in liquid.trajectory[:2]:
        box = ts.triclinic_dimensions.astype(np.float64)
        n, kmag = np_reciprocal_vectors(box, edges[-1], edges[0])
        kvec = 2 * np.pi * n @ np.linalg.inv(box).T
        ib = np.searchsorted(edges, kmag, side="right") - 1
        amp = np.exp(1j * liquid.atoms.positions.astype(np.float64) @ kvec.T)
        for m in range(len(kvec)):
            f = np.where(elements == "O", fq["O"][ib[m]], fq["Na"][ib[m]])
            num[ib[m]] += abs((f * amp[:, m]).sum()) ** 2 / 500
            counts[ib[m]] += 1
    liquid.trajectory[0]
    c = np.array([0.6, 0.4])
    fo, fna = fq["O"], fq["Na"]
    mean_f = c[0] * fo + c[1] * fna
    mean_f2 = c[0] * fo ** 2 + c[1] * fna ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = 1.0 + (num / counts - mean_f2) / mean_f ** 2
    np.testing.assert_allclose(res.s, ref, rtol=1e-4, atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(res.mean_sq_f, mean_f2, rtol=1e-12)


def test_partials_and_total_consistent(liquid, kspace):
    """Number-weighted total of the partials = S(q) of the same atoms as one species, on
    both routes; Bhatia-Thornton S_NN is that total."""
    kw = {"nbins": 1000, "range": (0.0, 10.0), "q_range": (0.0, 8.0), "qbins": 40,
          "q_crossover": 2.0}
    two = StructureFactor(liquid.atoms, by="name", **kw).run()
    one = StructureFactor(liquid.atoms, by=lambda g: np.zeros(len(g), int), **kw).run()
    assert two.results.n_kvectors[0] == 0 and two.results.n_kvectors[5] > 0
    np.testing.assert_allclose(two.results.s, one.results.s, rtol=0, atol=1e-10,
                               equal_nan=True)
    np.testing.assert_allclose(two.results.s_nn, one.results.s, rtol=0, atol=1e-10,
                               equal_nan=True)
    # weights by hand: F = sum_ab c_a c_b f_a f_b (S_ab - 1)
    wts = {"A": 2.0, "B": lambda q: 1.0 + 0.1 * q}
    w = StructureFactor(liquid.atoms, by="name", weights=wts, **kw).run()
    res = w.results
    q = res.q
    fa, fb = np.full_like(q, 2.0), 1.0 + 0.1 * q
    ca, cb = 0.6, 0.4
    s = {tuple(res.species[i] for i in p): res.partials[k] for k, p in enumerate(res.pairs)}
    f_ref = (ca * ca * fa * fa * (s["A", "A"] - 1) + cb * cb * fb * fb * (s["B", "B"] - 1)
             + 2 * ca * cb * fa * fb * (s["A", "B"] - 1))
    np.testing.assert_allclose(res.f, f_ref, rtol=1e-12, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(res.s, 1 + f_ref / (ca * fa + cb * fb) ** 2, rtol=1e-12,
                               equal_nan=True)
    # the BT limits hold at high q
    s_nn, s_nc, s_cc = bhatia_thornton(1.0, 1.0, 1.0, 0.6)
    assert (s_nn, s_nc, s_cc) == pytest.approx((1.0, 0.0, 0.24))


def test_ideal_gas_is_one(gas, kspace):
    """Uniform random atoms: S = 1 within its statistics. Direct: |A(k)|^2/N of each vector
    has mean 1 and variance 1 (exponential), so a bin of M vectors over F frames has standard
    error 1/sqrt(M F) (vectors of one frame nearly independent). Transform: the pairs are
    independent, so Var[S] = (2/N) rho int_0^r_max 4 pi r^2 (sinc W)^2 dr / F to leading
    order. Every bin within 5 standard errors."""
    q_range, qbins = (0.0, 6.0), 30
    sf = StructureFactor(gas.atoms, by="name", nbins=1200, range=(0.0, 12.0),
                         q_range=q_range, qbins=qbins, q_crossover=2.0,
                         window="lorch").run()
    res = sf.results
    nf = len(gas.trajectory)
    direct = np.isfinite(res.partials_direct[0])
    se_direct = 1.0 / np.sqrt(res.n_kvectors[direct] * nf)
    assert np.all(np.abs(res.partials_direct[0][direct] - 1) < 5 * se_direct)
    rho, n = 800 / 24.0 ** 3, 800
    r = np.linspace(1e-6, 12.0, 20001)
    w = lorch_window(r, 12.0)
    var = np.array([(2 / n) * rho * np.trapezoid(4 * np.pi * r ** 2 * (np.sinc(qq * r / np.pi)
                                                                       * w) ** 2, r)
                    for qq in res.q]) / nf
    assert np.all(np.abs(res.s_transform - 1) < 5 * np.sqrt(var))
    assert 0 < res.q_crossover < 6


# -- backends, blocks, outputs -----------------------------------------------------------------


def _sf(u, **kw):
    return StructureFactor(u.atoms, by="name", nbins=500, range=(0.0, 10.0),
                           q_range=(0.0, 6.0), qbins=30, q_crossover=1.5, **kw)


BACKENDS = [
    pytest.param({"backend": "multiprocessing", "n_workers": 2}, id="mp"),
    pytest.param({"backend": "multiprocessing", "n_workers": 2, "n_parts": 3}, id="mp-3parts"),
    pytest.param({"backend": "node", "n_workers": 2}, id="node"),
    pytest.param({"backend": "dask", "n_workers": 2}, id="dask"),
]


@pytest.mark.parametrize("how", BACKENDS)
def test_backends_identical(liquid, kspace, how):
    if how["backend"] == "dask" and _real_kspace() is None:
        pytest.skip("dask's process workers are spawned: they need the compiled k-space "
                    "engine, not this test's stand-in")
    ser = _sf(liquid).run(blocks=3)
    par = _sf(liquid).run(blocks=3, **how)
    for name in ("s", "partials", "f", "s_direct", "s_transform", "block_s", "s_sem",
                 "partials_sem", "frame_kspace_sum", "density"):
        assert np.array_equal(par.results[name], ser.results[name], equal_nan=True), name


@requires_gpu
def test_gpu_equals_cpu(liquid):
    """device='cuda' (histograms and k-space sums on the GPU) = the CPU: the histograms are
    identical integers, the k-space sums agree to the engine's GPU tolerance."""
    if _real_kspace() is None:
        pytest.skip("no compiled k-space engine in this build")
    cpu = _sf(liquid, device="cpu").run()
    gpu = _sf(liquid, device="cuda").run()
    assert np.array_equal(cpu.results.count_uint64, gpu.results.count_uint64)
    assert np.array_equal(cpu.results.partials_transform, gpu.results.partials_transform)
    np.testing.assert_allclose(gpu.results.s, cpu.results.s, rtol=1e-9, atol=1e-9,
                               equal_nan=True)
    # (the GPU's amplitudes come back from a thread, several frames in flight: each frame's
    # row is its own)
    np.testing.assert_allclose(gpu.results.frame_kspace_sum, cpu.results.frame_kspace_sum,
                               rtol=1e-9, atol=1e-9)


def test_blocks(liquid, kspace):
    full = _sf(liquid).run(blocks=3)
    for b in range(3):
        alone = _sf(liquid).run(start=b, stop=b + 1)
        np.testing.assert_allclose(full.results.block_s[b], alone.results.s, rtol=1e-12,
                                   equal_nan=True)
        np.testing.assert_allclose(full.results.block_partials[b], alone.results.partials,
                                   rtol=1e-12, equal_nan=True)
    sem = full.results.block_s.std(axis=0, ddof=1) / np.sqrt(3)
    np.testing.assert_allclose(full.results.s_sem, sem, rtol=1e-12, equal_nan=True)


def test_save_load_plot(liquid, kspace, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import mdakit_fastrdf

    sf = _sf(liquid).run(blocks=3)
    for suffix in ("npz", "csv"):
        path = sf.save(tmp_path / f"s.{suffix}")
        data = mdakit_fastrdf.load(path)
        for name in ("q", "s", "partials", "s_sem", "f"):
            np.testing.assert_allclose(data.results[name], sf.results[name], rtol=1e-12,
                                       equal_nan=True)
        assert data.parameters["q_crossover"] == 1.5
    ax = data.plot(pairs=[("A", "B")])
    assert ax.get_xlabel().startswith("q")
    assert len(ax.get_lines()) >= 2


def test_exported():
    import mdakit_fastrdf

    assert mdakit_fastrdf.StructureFactor is StructureFactor


# -- bad input ---------------------------------------------------------------------------------


def test_bad_input(liquid):
    ag = liquid.atoms
    kw = {"by": "name", "nbins": 500, "range": (0.0, 10.0)}
    with pytest.raises(ValueError, match="q must be positive"):
        StructureFactor(ag, q_range=(-1.0, 5.0), **kw)
    with pytest.raises(ValueError, match="q must be positive"):
        StructureFactor(ag, q_range=(0.0, 0.0), **kw)
    with pytest.raises(ValueError, match=r"nbins >= 1910"):  # pi / 0.02 = 157 < 600
        StructureFactor(ag, q_range=(0.0, 600.0), **kw)
    StructureFactor(ag, q_range=(0.0, np.pi / 0.02), **kw)  # the limit itself is fine
    with pytest.raises(ValueError, match="half the smallest box width"):
        StructureFactor(ag, by="name", range=(0.0, 12.0))
    with pytest.raises(ValueError, match="start at 0"):
        StructureFactor(ag, by="name", range=(1.0, 10.0))
    with pytest.raises(ValueError, match="window"):
        StructureFactor(ag, window="hann", **kw)
    for width in (0.0, -1.0, 10.5, np.nan, "5", True):
        with pytest.raises(ValueError, match="taper_width"):
            StructureFactor(ag, window="cosine", taper_width=width, **kw)
    with pytest.raises(ValueError, match="taper of window='cosine'"):
        StructureFactor(ag, window="lorch", taper_width=2.0, **kw)
    assert StructureFactor(ag, **kw).taper_width == 5.0  # default: r_max / 2
    with pytest.raises(ValueError, match="q_crossover"):
        StructureFactor(ag, q_crossover=-1.0, **kw)
    with pytest.raises(ValueError, match="qbins"):
        StructureFactor(ag, qbins=0, **kw)
    with pytest.raises(TypeError, match="unexpected keyword"):
        StructureFactor(ag, qmax=3, **kw)


def test_no_box_points_at_debye():
    u = make_universe(np.random.default_rng(1).random((50, 3)).astype(np.float32) * 10)
    with pytest.raises(ValueError, match="DebyeScattering"):
        StructureFactor(u.atoms, by="name", range=(0.0, 4.0))


def test_missing_elements():
    u = make_universe(np.random.default_rng(1).random((50, 3)).astype(np.float32) * 20,
                      [20, 20, 20, 90, 90, 90], names=["Xq"] * 50)
    with pytest.raises(ValueError, match="weights="):
        StructureFactor(u.atoms, by="name", range=(0.0, 8.0), nbins=400, weights="xray")
    # number weights need no element
    StructureFactor(u.atoms, by="name", range=(0.0, 8.0), nbins=400, weights="number")


def test_mda_universe_type():
    assert issubclass(StructureFactor, mda.analysis.base.AnalysisBase)
