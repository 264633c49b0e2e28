"""Intermediate scattering functions (analysis/intermediate_scattering.py) against
independent references: a float64 NumPy sum over the same reciprocal vectors and origins,
the package's StructureFactor (its direct k-space sum) for F(q, 0) = S(q), and the analytic
F_s(q, t) = exp(-q^2 D t) of Brownian particles. The time-correlation tools themselves are
tested in test_dynamics.py."""

import numpy as np
import pytest
from conftest import requires_gpu
from MDAnalysis.lib.mdamath import triclinic_vectors
from trajectories import brownian, memory_universe

from mdakit_fastrdf.analysis.intermediate_scattering import (
    IntermediateScattering,
    incoherent_scattering_length,
)

_universe = memory_universe
_brownian = brownian


# -- IntermediateScattering ----------------------------------------------------------------

def test_brownian_self_part_is_exp_minus_q2_d_t():
    """F_s(q, t) = exp(-q^2 D t) for Brownian particles, within their statistics."""
    D = 0.05
    u = _brownian(D=D)
    res = IntermediateScattering(u.atoms, q=[0.5, 1.0, 2.0], lags=20, coherent=False).run().results
    expected = np.exp(-np.outer(res.times, np.array([0.5, 1.0, 2.0]) ** 2 * D))
    np.testing.assert_allclose(res.f_self_total, expected, atol=0.02)
    assert res.times[5] == pytest.approx(5.0)
    # an ideal gas: its coherent F(q, t) decays the same way (S(q) = 1 on average)
    coh = IntermediateScattering(u.atoms, q=[2.0], lags=20, self_part=False).run().results
    np.testing.assert_allclose(coh.f_total[:, 0], expected[:, 2], atol=0.1)


def _brute_force(u, ag_species, q, dq, lags, origins):
    """float64: every reciprocal vector of each shell (both of each +-k), enumerated here,
    and the double sum over origins."""
    pos = np.array([ts.positions.astype(np.float64) for ts in u.trajectory])
    h = triclinic_vectors(u.dimensions).astype(np.float64)
    recip = 2 * np.pi * np.linalg.inv(h).T
    rng = np.arange(-8, 9)
    n = np.array(np.meshgrid(rng, rng, rng, indexing="ij")).reshape(3, -1).T
    k = n @ recip
    kmag = np.linalg.norm(k, axis=1)
    out = {}
    n_atoms = sum(len(s) for s in ag_species)
    for s, qv in enumerate(q):
        sel = k[(kmag >= qv - dq / 2) & (kmag < qv + dq / 2) & (kmag > 0)]
        rho = [np.exp(1j * pos[:, ix] @ sel.T).sum(axis=1) for ix in ag_species]  # (F, M)
        for a in range(len(ag_species)):
            for b in range(a, len(ag_species)):
                for j, tau in enumerate(lags):
                    t0 = np.arange(0, len(pos) - tau, origins)
                    c = 0.5 * (rho[a][t0] * np.conj(rho[b][t0 + tau])
                               + rho[b][t0] * np.conj(rho[a][t0 + tau]))
                    out[(a, b, j, s)] = c.real.mean() / n_atoms
    return out


@pytest.mark.parametrize("origins", [1, 2])
def test_coherent_equals_a_numpy_sum_over_the_same_vectors(origins):
    rng = np.random.default_rng(4)
    dims = [14.0, 15.0, 16.0, 80, 90, 100]
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    x = (rng.random((1, 60, 3)) + np.cumsum(rng.normal(0, 0.01, (12, 60, 3)), axis=0)) @ h
    u = _universe(x, [dims] * 12, ["O"] * 20 + ["H"] * 40)
    q, dq, lags = [0.8, 1.6], 0.3, [0, 1, 4, 11]
    res = IntermediateScattering(u.atoms, q=q, lags=lags, dq=dq, origins=origins,
                                 self_part=False).run().results
    species = [u.atoms.indices[u.atoms.elements == e] for e in res.species]
    ref = _brute_force(u, species, q, dq, lags, origins)
    for k, (a, b) in enumerate(res.pairs):
        for j in range(len(lags)):
            for s in range(len(q)):
                assert res.f_coherent[k, j, s] == pytest.approx(ref[(a, b, j, s)], rel=1e-10,
                                                                abs=1e-12)
    # number weights: F(q, t) is the sum of every ordered pair
    tot = sum((1 if a == b else 2) * res.f_coherent[k] for k, (a, b) in enumerate(res.pairs))
    np.testing.assert_allclose(res.f_total, tot, rtol=1e-12)


def test_coherent_at_lag_zero_is_the_static_structure_factor():
    """F(q, 0) = S(q) of the same vectors and frames: the package's StructureFactor with
    every q bin on its direct k-space sum (one species, so its Faber-Ziman S(q) is
    <|rho_k|^2> / N), the bins the same shells."""
    from mdakit_fastrdf.analysis.structure_factor import StructureFactor

    rng = np.random.default_rng(6)
    dims = [13.0, 14.0, 15.5, 85, 95, 100]
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    x = (rng.random((1, 80, 3)) + np.cumsum(rng.normal(0, 0.01, (6, 80, 3)), axis=0)) @ h
    u = _universe(x, [dims] * 6, ["O"] * 80)
    dq = 0.25
    q = 0.5 + dq * (np.arange(8) + 0.5)  # shells [0.5, 0.75), ..., [2.25, 2.5)
    res = IntermediateScattering(u.atoms, q=q, lags=3, dq=dq, self_part=False).run().results
    sq = StructureFactor(u.atoms, range=(0.0, 5.0), nbins=500, q_range=(0.5, 2.5), qbins=8,
                         q_crossover=3.0, device="cpu").run().results
    assert np.all(np.isfinite(sq.s_direct))
    # (1e-7: StructureFactor builds its reciprocal vectors from the float32 box of the
    # timestep, IntermediateScattering from the float64 dimensions; measured 5e-9)
    np.testing.assert_allclose(res.f_total[0], sq.s_direct, rtol=1e-7)
    # and the lags decay from it: not the same numbers at lag 3
    assert not np.allclose(res.f_total[3], sq.s_direct, rtol=1e-3)


def test_vectors_correlated_in_chunks_hold_memory_to_the_amplitudes(monkeypatch):
    """The coherent correlations run a chunk of vectors at a time: the same F(q, t) as in
    one piece, and the run's peak memory (tracemalloc, which sees NumPy's buffers) stays
    near the per-frame amplitudes it keeps, where one piece needs several times them."""
    import tracemalloc

    from mdakit_fastrdf.analysis import intermediate_scattering as isf_module

    u = _brownian(n=20, frames=200, box=30.0)
    kw = {"q": [1.0, 2.0, 3.0], "lags": 20, "dq": 0.5, "self_part": False, "by": {"all": u.atoms}}

    def run(chunk_bytes):
        monkeypatch.setattr(isf_module, "CORRELATION_CHUNK_BYTES", chunk_bytes)
        tracemalloc.start()
        res = IntermediateScattering(u.atoms, **kw).run().results
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return res, peak

    whole, peak_whole = run(1 << 40)
    chunked, peak_chunked = run(1 << 16)
    amplitudes = 2 * 200 * int(whole.n_vectors.sum()) * 8  # (re and im, float64)
    assert amplitudes > 4e6  # (the test means something: ~5,000 vectors)
    np.testing.assert_allclose(chunked.f_total, whole.f_total, rtol=1e-12, atol=1e-15)
    assert peak_chunked < 1.5 * amplitudes < peak_whole


def test_every_backend_gives_the_same_results():
    u = _brownian(n=300, frames=30)
    kw = {"q": [0.7, 1.5], "lags": 8}
    ser = IntermediateScattering(u.atoms, **kw).run().results
    par = IntermediateScattering(u.atoms, **kw).run(backend="multiprocessing",
                                                    n_workers=2).results
    for name in ("f_coherent", "f_total", "f_self", "f_self_total", "times"):
        np.testing.assert_allclose(par[name], ser[name], rtol=1e-12, atol=1e-14)


def test_neutron_self_weights_are_incoherent_lengths():
    """b_inc = sqrt(sigma_inc / 4 pi), sigma_inc from periodictable (barn = 100 fm^2)."""
    import periodictable

    assert incoherent_scattering_length("H") == pytest.approx(
        np.sqrt(periodictable.H.neutron.incoherent * 100 / (4 * np.pi)))
    u = _brownian(n=200, frames=10)
    r = IntermediateScattering(u.atoms, q=[1.0], lags=3, weights="neutron").run().results
    h, o = r.species.index("H"), r.species.index("O")
    assert r.self_weights[h, 0] == pytest.approx(incoherent_scattering_length("H"))
    assert r.weights[h, 0] == pytest.approx(periodictable.H.neutron.b_c)
    # the hydrogens dominate the total self part
    wts = np.array([100 * r.self_weights[o, 0] ** 2, 100 * r.self_weights[h, 0] ** 2])
    expect = (wts[0] * r.f_self[o, :, 0] + wts[1] * r.f_self[h, :, 0]) / wts.sum()
    np.testing.assert_allclose(r.f_self_total[:, 0], expect, rtol=1e-12)


def test_bad_input_is_a_clear_error():
    u = _brownian(n=100, frames=6)
    with pytest.raises(ValueError, match="largest lag allowed is 5"):
        IntermediateScattering(u.atoms, q=[1.0], lags=6).run()
    with pytest.raises(ValueError, match="q must be"):
        IntermediateScattering(u.atoms, q=[0.0], lags=2)
    with pytest.raises(ValueError, match="holds no reciprocal vector"):
        IntermediateScattering(u.atoms, q=[0.05], lags=2, dq=0.01)
    with pytest.raises(ValueError, match="weights"):
        IntermediateScattering(u.atoms, q=[1.0], lags=2, weights="light")
    with pytest.raises(ValueError, match="blocks"):
        IntermediateScattering(u.atoms, q=[1.0], lags=2).run(blocks=2)
    with pytest.raises(ValueError, match="nothing to compute"):
        IntermediateScattering(u.atoms, q=[1.0], lags=2, self_part=False, coherent=False)
    moving = u.select_atoms("prop x < 15", updating=True)
    with pytest.raises(ValueError, match="atomgroup is an UpdatingAtomGroup.*static"):
        IntermediateScattering(moving, q=[1.0], lags=2)
    # a box that changes (NPT): the coherent part refuses it, and says what takes it
    x = np.random.default_rng(5).random((4, 20, 3)) * 10
    dims = [[10.0, 10, 10, 90, 90, 90]] * 3 + [[10.5, 10, 10, 90, 90, 90]]
    v = _universe(x, dims, ["O"] * 20)
    with pytest.raises(ValueError, match="constant box.*coherent=False"):
        IntermediateScattering(v.atoms, q=[1.0], lags=2).run()


def test_self_part_takes_a_changing_box():
    """NPT: each frame's box differs; F_s against NumPy, positions made whole by steps to
    their minimum image in each frame's own box (a loop written here) and np.sinc."""
    rng = np.random.default_rng(6)
    frames, n = 14, 60
    widths = 12.0 * (1 + 0.02 * np.sin(np.arange(frames)))
    walk = rng.random((n, 3)) * widths[0] + np.cumsum(rng.normal(0, 0.3, (frames, n, 3)),
                                                      axis=0)
    dims = [[w, w, w, 90, 90, 90] for w in widths]
    u = _universe(np.mod(walk, widths[:, None, None]), dims, ["O"] * n)
    q, lags = np.array([0.8, 1.6]), 5
    got = IntermediateScattering(u.atoms, q=q, lags=lags, coherent=False).run().results
    x = u.trajectory.timeseries(order="fac").astype(np.float64)
    box = np.array([ts.dimensions[0] for ts in u.trajectory], dtype=np.float64)
    whole = [x[0]]
    for t in range(1, frames):
        step = x[t] - x[t - 1]
        whole.append(whole[-1] + step - box[t] * np.round(step / box[t]))
    whole = np.array(whole)
    ref = np.zeros((lags + 1, len(q)))
    for tau in range(lags + 1):
        d = np.linalg.norm(whole[tau:] - whole[:frames - tau], axis=2)
        ref[tau] = [np.sinc(qv * d / np.pi).mean() for qv in q]
    np.testing.assert_allclose(got.f_self_total, ref, rtol=1e-12)


@requires_gpu
@pytest.mark.gpu
def test_gpu_amplitudes_give_the_cpu_results():
    """device='cuda': the amplitudes summed on the GPU, the same F(q, t) as the CPU's to
    rounding (both float64 sums, in another order)."""
    u = _brownian(n=2000, frames=20)
    kw = {"q": [0.6, 1.2, 2.4], "lags": 10, "self_part": False}
    cpu = IntermediateScattering(u.atoms, device="cpu", **kw).run().results
    gpu = IntermediateScattering(u.atoms, device="cuda", **kw).run().results
    np.testing.assert_allclose(gpu.f_coherent, cpu.f_coherent, rtol=1e-9, atol=1e-12)


@requires_gpu
@pytest.mark.gpu
def test_gpu_frames_in_flight_keep_their_rows():
    """On a GPU the amplitudes of up to FRAMES_IN_FLIGHT frames are computed while the next
    frames are read, and stored by their own frame indices: over a strided run of more
    frames than that (stored in the loop and at its end), the same F(q, t) as the CPU's."""
    from mdakit_fastrdf.engine.kspace import FRAMES_IN_FLIGHT

    frames = 3 * FRAMES_IN_FLIGHT + 5
    u = _brownian(n=500, frames=2 * frames)
    kw = {"q": [0.6, 1.2], "lags": 6, "self_part": False}
    cpu = IntermediateScattering(u.atoms, device="cpu", **kw).run(step=2).results
    gpu = IntermediateScattering(u.atoms, device="cuda", **kw).run(step=2).results
    np.testing.assert_allclose(gpu.f_coherent, cpu.f_coherent, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_save_load_and_plot(tmp_path, suffix):
    """Saved results load back with the same F(q, t); plot() draws F_s and F for each q."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from mdakit_fastrdf import load, plot

    u = _brownian(n=200, frames=12)
    r = IntermediateScattering(u.atoms, q=[1.0, 2.0], lags=4).run()
    assert "count_uint64" not in r.results and "frame_positions" not in r.results
    path = tmp_path / f"isf{suffix}"
    r.save(path)
    d = load(path)
    for name in ("f_total", "f_self", "f_coherent", "times"):
        np.testing.assert_allclose(d.results[name], r.results[name], rtol=1e-12)
    ax = plot(d)
    assert len(ax.lines) == 4
    np.testing.assert_allclose(ax.lines[0].get_xdata(), r.results.times)
