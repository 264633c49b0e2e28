"""Intermediate scattering functions (analysis/intermediate_scattering.py) and the time
correlation tools they share (analysis/dynamics.py), against independent references:
MDAnalysis's NoJump, direct double sums, a float64 NumPy sum over the same reciprocal
vectors, and the analytic F_s(q, t) = exp(-q^2 D t) of Brownian particles."""

import numpy as np
import pytest

import MDAnalysis as mda
from conftest import requires_gpu
from MDAnalysis.coordinates.memory import MemoryReader
from MDAnalysis.lib.mdamath import triclinic_vectors

from mdakit_fastrdf.analysis.dynamics import (
    check_lags,
    check_origins,
    time_correlation,
    unwrap_positions,
)
from mdakit_fastrdf.analysis.intermediate_scattering import (
    IntermediateScattering,
    incoherent_scattering_length,
)


def _universe(positions, dims, elements=None, dt=1.0):
    f, n, _ = positions.shape
    u = mda.Universe.empty(n, trajectory=True)
    if elements is not None:
        u.add_TopologyAttr("elements", list(elements))
    u.load_new(np.asarray(positions, dtype=np.float32), format=MemoryReader,
               dimensions=np.asarray(dims, dtype=np.float64), dt=dt)
    return u


def _brownian(n=1000, frames=120, box=30.0, D=0.05, dt=1.0, seed=0):
    """Brownian particles (diffusion coefficient D, Å^2/ps), wrapped into a cubic box."""
    rng = np.random.default_rng(seed)
    x = rng.random((1, n, 3)) * box + np.cumsum(
        rng.normal(0.0, np.sqrt(2 * D * dt), (frames, n, 3)), axis=0)
    return _universe(np.mod(x, box), [box, box, box, 90, 90, 90],
                     ["O"] * (n // 2) + ["H"] * (n - n // 2), dt=dt)


# -- dynamics.py ---------------------------------------------------------------------------

@pytest.mark.parametrize("origins", [1, 3])
def test_time_correlation_equals_a_direct_double_sum(origins):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(37, 4)) + 1j * rng.normal(size=(37, 4))
    b = rng.normal(size=(37, 4)) + 1j * rng.normal(size=(37, 4))
    lags = [0, 1, 5, 36]
    got = time_correlation(a, b, lags, origins)
    for k, tau in enumerate(lags):
        t0 = range(0, 37 - tau, origins)
        ref = sum(a[t] * np.conj(b[t + tau]) for t in t0) / len(t0)
        np.testing.assert_allclose(got[k], ref, rtol=1e-12, atol=1e-12)
    real = time_correlation(a.real, lags=lags)
    assert real.dtype == np.float64


@pytest.mark.parametrize("dims", [[20.0, 22.0, 25.0, 90, 90, 90], [20.0, 21.0, 23.0, 70, 80, 100]])
def test_unwrap_equals_mdanalysis_nojump(dims):
    """Atoms diffusing across the box, wrapped: made whole as NoJump makes them."""
    from MDAnalysis.transformations.nojump import NoJump

    rng = np.random.default_rng(2)
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    frac = rng.random((1, 50, 3)) + np.cumsum(rng.normal(0, 0.03, (40, 50, 3)), axis=0)
    true = frac @ h
    wrapped = np.mod(frac, 1.0) @ h
    u = _universe(wrapped, [dims] * 40)
    ours = unwrap_positions(u.trajectory.timeseries(order="fac"), [dims] * 40)
    u.trajectory.add_transformations(NoJump())
    ref = np.array([ts.positions.astype(np.float64) for ts in u.trajectory])
    np.testing.assert_allclose(ours, ref, atol=2e-3)  # (NoJump works in float32)
    np.testing.assert_allclose(ours - ours[0], true - true[0], atol=2e-3)


def test_unwrap_refuses_a_stride_too_long():
    rng = np.random.default_rng(3)
    x = rng.random((3, 10, 3)) * 20.0
    x[2, 0] = x[1, 0] + [8.0, 0.0, 0.0]  # 0.4 of the width in one step
    with pytest.raises(ValueError, match="step=1"):
        unwrap_positions(np.mod(x, 20.0), [[20.0, 20.0, 20.0, 90, 90, 90]] * 3)


def test_lags_and_origins_checks():
    assert check_lags(3, 10).tolist() == [0, 1, 2, 3]
    assert check_lags([5, 0, 5], 10).tolist() == [0, 5]
    with pytest.raises(ValueError, match="largest lag allowed is 9"):
        check_lags(10, 10)
    with pytest.raises(ValueError, match=">= 0"):
        check_lags([-1], 10)
    with pytest.raises(TypeError, match="lags must be"):
        check_lags([0.5], 10)
    with pytest.raises(ValueError, match="origins"):
        check_origins(0)


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
                assert res.f_coherent[k, j, s] == pytest.approx(ref[(a, b, j, s)], rel=1e-9,
                                                                abs=1e-12)
    # number weights: F(q, t) is the sum of every ordered pair
    tot = sum((1 if a == b else 2) * res.f_coherent[k] for k, (a, b) in enumerate(res.pairs))
    np.testing.assert_allclose(res.f_total, tot, rtol=1e-12)


def test_every_backend_gives_the_same_results():
    u = _brownian(n=300, frames=30)
    kw = dict(q=[0.7, 1.5], lags=8)
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
    # a box that changes (NPT)
    x = np.random.default_rng(5).random((4, 20, 3)) * 10
    dims = [[10.0, 10, 10, 90, 90, 90]] * 3 + [[10.5, 10, 10, 90, 90, 90]]
    v = _universe(x, dims, ["O"] * 20)
    with pytest.raises(ValueError, match="constant box"):
        IntermediateScattering(v.atoms, q=[1.0], lags=2).run()


@requires_gpu
@pytest.mark.gpu
def test_gpu_amplitudes_give_the_cpu_results():
    """device='cuda': the amplitudes summed on the GPU, the same F(q, t) as the CPU's to
    rounding (both float64 sums, in another order)."""
    u = _brownian(n=2000, frames=20)
    kw = dict(q=[0.6, 1.2, 2.4], lags=10, self_part=False)
    cpu = IntermediateScattering(u.atoms, device="cpu", **kw).run().results
    gpu = IntermediateScattering(u.atoms, device="cuda", **kw).run().results
    np.testing.assert_allclose(gpu.f_coherent, cpu.f_coherent, rtol=1e-9, atol=1e-12)
