"""DynamicStructureFactor (analysis/dynamic_structure_factor.py) against independent
references: a float64 cosine sum written here, the Lorentzian transform of exp(-G t), and
the sum rule int S(q, w) dw = S(q) with S(q) from the package's StructureFactor (its direct
k-space sum on the same shells and frames)."""

import numpy as np
import pytest
from MDAnalysis.lib.mdamath import triclinic_vectors
from trajectories import memory_universe

from mdakit_fastrdf.analysis.dynamic_structure_factor import (
    DynamicStructureFactor,
    spectrum,
)


def _universe(positions, dims, elements, dt=0.5):
    return memory_universe(positions, dims, elements, dt=dt)


@pytest.mark.parametrize("window", ["hann", "none"])
def test_spectrum_equals_a_cosine_sum(window):
    rng = np.random.default_rng(0)
    f = rng.normal(size=(13, 2))
    dt = 0.3
    omega, s = spectrum(f, dt, window)
    n = len(f)
    k = np.arange(n)
    w = 0.5 * (1 + np.cos(np.pi * k / n)) if window == "hann" else np.ones(n)
    for j, om in enumerate(omega):
        ref = dt / (2 * np.pi) * (f[0] * w[0] + 2 * np.sum(
            (f[1:] * w[1:, None]) * np.cos(om * k[1:] * dt)[:, None], axis=0))
        np.testing.assert_allclose(s[j], ref, rtol=1e-12, atol=1e-14)
    assert omega[n - 1] == 0.0
    assert omega[1] - omega[0] == pytest.approx(2 * np.pi / ((2 * n - 1) * dt))


def test_spectrum_of_an_exponential_is_a_lorentzian():
    """F = exp(-G t): S(w) = G / (pi (G^2 + w^2)), once the window is long and fine."""
    gamma, dt = 0.5, 0.01
    f = np.exp(-gamma * dt * np.arange(4000))
    omega, s = spectrum(f, dt, "none")
    ref = gamma / (np.pi * (gamma ** 2 + omega ** 2))
    near = np.abs(omega) < 5
    np.testing.assert_allclose(s[near], ref[near], rtol=0.01)


def test_spectrum_bad_input():
    with pytest.raises(ValueError, match="window"):
        spectrum(np.ones(4), 1.0, "gauss")
    with pytest.raises(ValueError, match="dt"):
        spectrum(np.ones(4), 0.0)


def test_sum_rule_is_the_static_structure_factor():
    """int S(q, w) dw = F(q, 0) = S(q) from StructureFactor, for the coherent part; = 1
    for the self part; and S(q, w) is the spectrum of the analysis's own F(q, t)."""
    from mdakit_fastrdf.analysis.structure_factor import StructureFactor

    rng = np.random.default_rng(6)
    dims = [13.0, 14.0, 15.5, 85, 95, 100]
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    x = (rng.random((1, 80, 3)) + np.cumsum(rng.normal(0, 0.01, (12, 80, 3)), axis=0)) @ h
    u = _universe(x, [dims] * 12, ["O"] * 80)
    dq = 0.25
    q = 0.5 + dq * (np.arange(8) + 0.5)
    res = DynamicStructureFactor(u.atoms, q=q, lags=8, dq=dq).run().results
    sq = StructureFactor(u.atoms, range=(0.0, 5.0), nbins=500, q_range=(0.5, 2.5), qbins=8,
                         q_crossover=3.0, device="cpu").run().results
    d_omega = res.omega[1] - res.omega[0]
    assert res.s_total.shape == (17, 8) and res.omega.shape == (17,)
    # (1e-7: StructureFactor's float32 box against the float64 one; measured 5e-9)
    np.testing.assert_allclose(res.s_total.sum(axis=0) * d_omega, sq.s_direct, rtol=1e-7)
    np.testing.assert_allclose(res.s_self_total.sum(axis=0) * d_omega, 1.0, rtol=1e-12)
    omega, s = spectrum(res.f_total, 0.5, "hann")
    np.testing.assert_allclose(res.omega, omega, rtol=1e-12)
    np.testing.assert_allclose(res.s_total, s, rtol=1e-12, atol=1e-15)
    assert res.s_coherent.shape == (1, 17, 8) and res.s_self.shape == (1, 17, 8)


def test_bad_input_is_a_clear_error():
    x = np.random.default_rng(5).random((4, 20, 3)) * 10
    u = _universe(x, [[10.0, 10, 10, 90, 90, 90]] * 4, ["O"] * 20)
    with pytest.raises(TypeError, match="lags must be an int"):
        DynamicStructureFactor(u.atoms, q=[1.0], lags=[0, 2])
    with pytest.raises(ValueError, match="at least lags=1"):
        DynamicStructureFactor(u.atoms, q=[1.0], lags=0)
    with pytest.raises(ValueError, match="window"):
        DynamicStructureFactor(u.atoms, q=[1.0], lags=2, window="gauss")
    with pytest.raises(ValueError, match="largest lag allowed is 3"):
        DynamicStructureFactor(u.atoms, q=[1.0], lags=4).run()


def test_serial_and_multiprocessing_agree():
    rng = np.random.default_rng(7)
    x = rng.random((1, 150, 3)) * 12 + np.cumsum(rng.normal(0, 0.2, (16, 150, 3)), axis=0)
    u = _universe(np.mod(x, 12.0), [[12.0, 12, 12, 90, 90, 90]] * 16, ["O"] * 100 + ["H"] * 50)
    kw = {"q": [1.0, 2.0], "lags": 6}
    ser = DynamicStructureFactor(u.atoms, **kw).run().results
    par = DynamicStructureFactor(u.atoms, **kw).run(backend="multiprocessing",
                                                    n_workers=2).results
    for name in ("omega", "s_coherent", "s_total", "s_self", "s_self_total"):
        np.testing.assert_allclose(par[name], ser[name], rtol=1e-12, atol=1e-14)
