"""The van Hove function (analysis/van_hove.py) against independent references: MDAnalysis-
compatible InterRDF for G_d(r, 0), a float64 NumPy brute force for the distinct counts at
every lag, NumPy histograms of displacements unwrapped here, and the analytic Gaussian
G_s(r, t) and ideal-gas G_d = 1 of Brownian particles."""

import numpy as np
import pytest
from conftest import brute_force_counts, datafile, requires_gpu
from MDAnalysis.lib.mdamath import triclinic_vectors
from scipy.special import erf
from trajectories import brownian, brownian_positions, memory_universe

from mdakit_fastrdf import InterRDF, VanHove


@pytest.fixture(scope="module")
def triclinic_water():
    """MDAnalysis's GRO/XTC test trajectory (a triclinic box, 10 frames)."""
    import MDAnalysis as mda

    return mda.Universe(*datafile("GRO", "XTC"))


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("method", ["allpairs", "cells"])
def test_distinct_at_lag_zero_is_interrdf_bit_for_bit(triclinic_water, precision, method):
    """G_d(r, 0) of a group with itself is InterRDF(g, g, exclusion_block=(1, 1))'s g(r),
    of two groups InterRDF(g1, g2)'s: the same counts and the same bits."""
    u = triclinic_water
    g1, g2 = u.atoms[::40], u.atoms[7::40]
    kw = {"nbins": 50, "range": (0.0, 8.0), "precision": precision, "method": method}
    vh = VanHove(g1, lags=[0, 3], self_part=False, **kw).run().results
    ref = InterRDF(g1, g1, exclusion_block=(1, 1), **kw).run().results
    np.testing.assert_array_equal(vh.count_distinct[0, 0], ref.count)
    np.testing.assert_array_equal(vh.g_distinct[0, 0], ref.rdf)
    assert vh.species == ["g1"] and vh.pairs.tolist() == [[0, 0]]
    # the lag 3 is another histogram
    assert not np.array_equal(vh.count_distinct[0, 1], vh.count_distinct[0, 0])
    two = VanHove(g1, g2, lags=[0, 2], self_part=False, **kw).run().results
    ref2 = InterRDF(g1, g2, **kw).run().results
    np.testing.assert_array_equal(two.count_distinct[0, 0], ref2.count)
    np.testing.assert_array_equal(two.g_distinct[0, 0], ref2.rdf)
    assert two.species == ["g1", "g2"] and two.pairs.tolist() == [[0, 1]]


def _reference_distinct(u, ix1, ix2, lags, origins, edges):
    """float64 brute force: every pair i in g1 at t0, j in g2 at t0 + t, i != j, minimum
    image in the box of t0, np.histogram of the distances, summed over the origins."""
    frames = [(ts.positions.astype(np.float64), ts.dimensions.copy()) for ts in u.trajectory]
    out = np.zeros((len(lags), len(edges) - 1), dtype=np.int64)
    for j, tau in enumerate(lags):
        for t0 in range(0, len(frames) - tau, origins):
            out[j] += brute_force_counts(frames[t0][0][ix1], frames[t0 + tau][0][ix2],
                                         frames[t0][1], edges, labels1=ix1, labels2=ix2)
    return out


@pytest.mark.parametrize("dims", [[20.0, 20.0, 20.0, 90, 90, 90],
                                  [18.0, 19.0, 21.0, 75, 95, 105]], ids=["cube", "triclinic"])
@pytest.mark.parametrize("origins", [1, 3])
def test_distinct_counts_equal_a_float64_brute_force(dims, origins):
    rng = np.random.default_rng(11)
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    x = (rng.random((1, 90, 3)) + np.cumsum(rng.normal(0, 0.02, (10, 90, 3)), axis=0)) @ h
    u = memory_universe(x, [dims] * 10, ["O"] * 90)
    g1, g2 = u.atoms[:60], u.atoms[30:]  # (overlapping: the 30 shared atoms' own pairs go)
    lags, edges = [0, 1, 4, 9], np.linspace(0.0, 8.0, 41)
    vh = VanHove(g1, g2, lags=lags, origins=origins, nbins=40, range=(0.0, 8.0),
                 self_part=False).run().results
    ref = _reference_distinct(u, g1.ix, g2.ix, lags, origins, edges)
    np.testing.assert_array_equal(vh.count_distinct[0], ref)
    np.testing.assert_array_equal(vh.n_origins, [len(range(0, 10 - t, origins)) for t in lags])


def _gaussian_shell_probability(edges, D, t):
    """P(a <= |dr| < b) of a 3-D Gaussian displacement of variance 2 D t per axis."""
    s = np.sqrt(2 * D * t)
    r = np.asarray(edges) / s
    cdf = erf(r / np.sqrt(2)) - np.sqrt(2 / np.pi) * r * np.exp(-r * r / 2)
    return np.diff(cdf)


def test_brownian_self_part_is_a_gaussian():
    """G_s(r, t) = (4 pi D t)^(-3/2) exp(-r^2 / 4 D t): the probability of each shell,
    4 pi r^2 G_s dr integrated over the bin, within the statistics of 1,000 particles."""
    D = 0.05
    u = brownian(n=1000, frames=80, D=D)
    vh = VanHove(u.atoms, lags=[5, 20, 60], nbins=40, range=(0.0, 8.0),
                 distinct=False).run().results
    shells = 4 / 3 * np.pi * np.diff(vh.edges ** 3)
    for j, t in enumerate(vh.times):
        p = vh.g_self_total[j] * shells
        expected = _gaussian_shell_probability(vh.edges, D, t)
        np.testing.assert_allclose(p, expected, atol=0.01)
        assert p.sum() == pytest.approx(expected.sum(), abs=3e-3)  # (0.985 within 8 Å at 60 ps)
    assert "g_distinct" not in vh


def test_self_counts_equal_numpy_histograms_of_displacements_unwrapped_here():
    """The self counts are np.histogram's of |r_i(t0 + t) - r_i(t0)| over the origins, the
    positions made whole here by summing each step's orthorhombic minimum image."""
    u = brownian(n=120, frames=15, box=12.0, D=0.1)
    lags, edges = [1, 4, 14], np.linspace(0.0, 4.0, 21)
    vh = VanHove(u.atoms, lags=lags, origins=2, nbins=20, range=(0.0, 4.0),
                 distinct=False, by="element").run().results
    x = u.trajectory.timeseries(order="fac").astype(np.float64)
    step = np.diff(x, axis=0)
    step -= 12.0 * np.round(step / 12.0)
    whole = np.concatenate([x[:1], x[:1] + np.cumsum(step, axis=0)])
    for a, element in enumerate(vh.species):
        ix = u.atoms.indices[u.atoms.elements == element]
        for j, tau in enumerate(lags):
            d = np.concatenate([np.linalg.norm(whole[t0 + tau, ix] - whole[t0, ix], axis=1)
                                for t0 in range(0, 15 - tau, 2)])
            ref, _ = np.histogram(d, bins=edges)
            got = vh.g_self[a, j] * vh.n_origins[j] * len(ix) * 4 / 3 * np.pi * np.diff(
                edges ** 3)
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


def test_ideal_gas_distinct_part_is_one_at_every_lag():
    """Independent Brownian particles are an ideal gas: G_d = 1 at every r and lag, within
    the statistics (a bin of 0.5 Å beyond 3 Å holds ~1e4 pairs per origin)."""
    u = brownian(n=800, frames=50, D=0.05)
    vh = VanHove(u.atoms, lags=[0, 10, 40], nbins=30, range=(0.0, 9.0),
                 self_part=False).run().results
    far = vh.bins > 3.0
    for j in range(3):
        np.testing.assert_allclose(vh.g_distinct[0, j, far], 1.0, atol=0.05)
        assert vh.g_distinct[0, j, far].mean() == pytest.approx(1.0, abs=0.01)


def test_species_partials_add_up_to_the_whole():
    """by='element': every ordered pair of species; their counts add up to the group's,
    and the species' self parts, weighted by their atoms, to the total."""
    u = brownian(n=200, frames=12, box=15.0)
    kw = {"lags": [0, 3, 8], "nbins": 30, "range": (0.0, 7.0)}
    whole = VanHove(u.atoms, **kw).run().results
    parts = VanHove(u.atoms, by="element", **kw).run().results
    assert sorted(parts.species) == ["H", "O"]
    assert parts.pairs.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    np.testing.assert_array_equal(parts.count_distinct.sum(axis=0), whole.count_distinct[0])
    sizes = np.array([np.sum(u.atoms.elements == s) for s in parts.species])
    np.testing.assert_allclose(np.einsum("a,alk->lk", sizes, parts.g_self) / sizes.sum(),
                               whole.g_self_total, rtol=1e-12)
    np.testing.assert_allclose(parts.g_self_total, whole.g_self_total, rtol=1e-12)
    # a species pair normalised by its own pairs: O-H and H-O at t = 0 are the same g(r)
    np.testing.assert_array_equal(parts.count_distinct[1, 0], parts.count_distinct[2, 0])


@pytest.mark.parametrize("origins", [1, 3])
def test_every_backend_gives_the_same_results(origins):
    """Parallel runs histogram each part's own time origins, the part followed by the next
    max(lags) frames: the parts' integer counts add up to the serial run's, bit for bit,
    with the parts MDAnalysis's backends cut (2) and with more (5, merged to 3 so that
    each holds twice the halo), and on the node backend's CPU workers."""
    u = brownian(n=300, frames=60)
    kw = {"lags": [0, 1, 4, 8], "nbins": 20, "range": (0.0, 6.0), "origins": origins}
    serial = VanHove(u.atoms, **kw).run()
    ser = serial.results
    from mdakit_fastrdf import NodeBackend

    for run_kw, halos in (({"backend": "multiprocessing", "n_workers": 2}, 1),
                          ({"backend": "multiprocessing", "n_workers": 2, "n_parts": 5}, 2),
                          ({"backend": NodeBackend(cpu_workers=2, part_frames=7)}, 2)):
        vh = VanHove(u.atoms, **kw)
        par = vh.run(**run_kw).results
        assert len(vh._own_frames) == halos  # (the parts that carried a halo)
        for name in ("count_distinct", "g_distinct", "g_self", "g_self_total", "times",
                     "n_origins", "box_volume_cum", "rho"):
            np.testing.assert_array_equal(par[name], ser[name], err_msg=name)
        np.testing.assert_array_equal(vh.frames, serial.frames)  # (no halo frame twice)


def test_parts_carry_a_halo_of_the_longest_lag():
    u = brownian(n=20, frames=40)
    vh = VanHove(u.atoms, lags=[0, 5])
    vh.lags = np.array([0, 5])
    groups = vh._setup_computation_groups(3)
    assert [len(g) for g in groups] == [14 + 5, 13 + 5, 13]
    assert [g[0, 0] for g in groups] == [0, 14, 27]
    np.testing.assert_array_equal(groups[0][:, 0], np.arange(19))  # its own 14 and 5 more
    assert vh._own_frames == {0: 14, 14: 13}
    # parts shorter than twice the halo are merged: 40 frames, lag 10 -> 2 parts, not 4;
    # lag 25 -> one part, no halo
    vh.lags = np.array([0, 10])
    assert [len(g) for g in vh._setup_computation_groups(4)] == [20 + 10, 20]
    vh.lags = np.array([0, 25])
    assert [len(g) for g in vh._setup_computation_groups(4)] == [40]


def test_bad_input_is_a_clear_error():
    u = brownian(n=50, frames=6)
    with pytest.raises(ValueError, match="largest lag allowed is 5"):
        VanHove(u.atoms, lags=6).run()
    with pytest.raises(ValueError, match="nothing to compute"):
        VanHove(u.atoms, lags=2, self_part=False, distinct=False)
    with pytest.raises(ValueError, match="by"):
        VanHove(u.atoms[:10], u.atoms[10:], lags=2, by="element")
    with pytest.raises(ValueError, match="blocks"):
        VanHove(u.atoms, lags=2).run(blocks=2)
    with pytest.raises(ValueError, match="lags"):
        VanHove(u.atoms, lags=[-1])
    with pytest.raises(TypeError, match="self_part"):
        VanHove(u.atoms, lags=2, self_part="yes")
    with pytest.raises(ValueError, match="origins"):
        VanHove(u.atoms, lags=2, origins=0)
    with pytest.raises(TypeError, match="lags"):
        VanHove(u.atoms)
    moving = u.select_atoms("prop x < 15", updating=True)
    with pytest.raises(ValueError, match="g1 is an UpdatingAtomGroup.*static"):
        VanHove(moving, lags=1)
    with pytest.raises(ValueError, match="g2 is an UpdatingAtomGroup"):
        VanHove(u.atoms, moving, lags=1)
    with pytest.raises(ValueError, match="species 'near' is an UpdatingAtomGroup"):
        VanHove(u.atoms, lags=1, by={"near": moving})
    x = np.random.default_rng(1).random((3, 10, 3)) * 10
    nobox = memory_universe(x, [[0.0, 0, 0, 90, 90, 90]] * 3)
    with pytest.raises(ValueError, match="periodic box"):
        VanHove(nobox.atoms, lags=1)
    # a stride at which atoms may cross half the box unseen
    far = memory_universe(np.mod(brownian_positions(n=20, frames=4, box=10.0, D=8.0), 10.0),
                          [[10.0, 10, 10, 90, 90, 90]] * 4)
    with pytest.raises(ValueError, match="cannot be made whole"):
        VanHove(far.atoms, lags=1, distinct=False).run()


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_save_load_and_plot(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from mdakit_fastrdf import load, plot

    u = brownian(n=200, frames=12)
    r = VanHove(u.atoms, lags=[0, 4], nbins=20, range=(0.0, 6.0)).run()
    assert "frame_positions" not in r.results and "count_uint64" not in r.results
    path = tmp_path / f"vh{suffix}"
    r.save(path)
    d = load(path)
    for name in ("g_distinct", "g_self", "g_self_total", "times", "bins"):
        np.testing.assert_allclose(d.results[name], r.results[name], rtol=1e-12)
    ax = plot(d)  # G_d at each lag (G_s, in 1/Å^3, on request)
    assert len(ax.lines) == 2
    np.testing.assert_allclose(ax.lines[0].get_xdata(), r.results.bins)
    np.testing.assert_allclose(ax.lines[1].get_ydata(), r.results.g_distinct[0, 1])
    assert len(plot(d, self_part=True).lines) == 4


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["single", "double"])
def test_gpu_counts_are_the_cpu_counts(precision):
    """device='cuda': the distinct pairs histogrammed on the GPU, the CPU's integers."""
    u = brownian(n=3000, frames=20, box=40.0)
    kw = {"lags": [0, 5, 19], "nbins": 60, "range": (0.0, 12.0), "precision": precision,
          "self_part": False}
    cpu = VanHove(u.atoms, device="cpu", **kw).run().results
    gpu = VanHove(u.atoms, device="cuda", **kw).run().results
    np.testing.assert_array_equal(gpu.count_distinct, cpu.count_distinct)
    np.testing.assert_array_equal(gpu.g_distinct, cpu.g_distinct)
