"""The time-correlation tools the dynamical analyses share (analysis/dynamics.py), against
independent references: MDAnalysis's NoJump transformation on atoms that cross the box
(orthorhombic and triclinic), and a float64 double loop over time origins and lags."""

import MDAnalysis as mda
import numpy as np
import pytest
from MDAnalysis.coordinates.memory import MemoryReader
from MDAnalysis.lib.mdamath import triclinic_vectors

from mdakit_fastrdf.analysis.dynamics import (
    MAX_STEP_FRACTION,
    check_lags,
    check_origins,
    origin_frames,
    time_correlation,
    unwrap_positions,
)


def _universe(positions, dims):
    n = positions.shape[1]
    u = mda.Universe.empty(n, trajectory=True)
    u.load_new(np.asarray(positions, dtype=np.float32), format=MemoryReader,
               dimensions=np.asarray(dims, dtype=np.float64))
    return u


def _double_loop(a, b, lags, stride):
    """C(tau) = mean over t0 = 0, s, 2s, ... (t0 + tau < F) of a[t0] conj(b[t0 + tau])."""
    a = np.asarray(a, dtype=np.complex128)
    b = np.asarray(b, dtype=np.complex128)
    out = []
    for tau in lags:
        acc = np.zeros(a.shape[1:], dtype=np.complex128)
        count = 0
        for t0 in range(len(a)):
            if t0 % stride == 0 and t0 + tau < len(a):
                acc += a[t0] * np.conj(b[t0 + tau])
                count += 1
        out.append(acc / count)
    return np.array(out)


# -- time_correlation -----------------------------------------------------------------------

@pytest.mark.parametrize("n_frames", [1, 2, 37, 64, 65])
def test_fft_correlation_equals_a_double_loop(n_frames):
    """origins=1 takes the FFT route: no circular wrap at any length, complex and real,
    several trailing axes."""
    rng = np.random.default_rng(n_frames)
    shape = (n_frames, 3, 2)
    a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    b = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    lags = check_lags(n_frames - 1, n_frames)
    got = time_correlation(a, b, lags=lags, origins=1)
    assert got.shape == (len(lags), 3, 2)
    np.testing.assert_allclose(got, _double_loop(a, b, lags, 1), rtol=1e-12, atol=1e-12)
    # b=None: a with itself; real input gives a real float64 result
    x = rng.normal(size=shape)
    auto = time_correlation(x, lags=lags)
    assert auto.dtype == np.float64
    np.testing.assert_allclose(auto, _double_loop(x, x, lags, 1).real, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("origins", [2, 3, 7])
def test_strided_origins_equal_a_double_loop(origins):
    rng = np.random.default_rng(10 + origins)
    a = rng.normal(size=(41, 5)) + 1j * rng.normal(size=(41, 5))
    b = rng.normal(size=(41, 5)) + 1j * rng.normal(size=(41, 5))
    lags = [0, 1, 6, 20, 40]
    got = time_correlation(a, b, lags=lags, origins=origins)
    np.testing.assert_allclose(got, _double_loop(a, b, lags, origins), rtol=1e-12,
                               atol=1e-12)


def test_fft_correlation_does_not_depend_on_threads():
    """The FFTs' threads share out the transforms of the trailing axes: the same bits for
    any count, and the double loop's values."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(40, 64)) + 1j * rng.normal(size=(40, 64))
    lags = check_lags(12, 40)
    one = time_correlation(a, lags=lags, n_threads=1)
    for n in (2, 3, None):
        np.testing.assert_array_equal(time_correlation(a, lags=lags, n_threads=n), one)
    np.testing.assert_allclose(one, _double_loop(a, a, lags, 1), rtol=1e-12, atol=1e-12)


def test_correlation_is_not_the_circular_one():
    """A ramp's circular correlation differs from the linear one at every lag > 0: the
    zero padding must be there."""
    a = np.arange(8.0)
    lin = time_correlation(a, lags=[3])
    circ = np.mean(a * np.roll(a, -3))
    assert lin[0] == pytest.approx(np.mean(a[:5] * a[3:]))
    assert lin[0] != pytest.approx(circ)


def test_origin_frames():
    assert origin_frames(10, 0, 1).tolist() == list(range(10))
    assert origin_frames(10, 3, 2).tolist() == [0, 2, 4, 6]
    assert origin_frames(10, 9, 4).tolist() == [0]
    assert origin_frames(10, 10, 1).tolist() == []
    with pytest.raises(ValueError, match="origins"):
        origin_frames(10, 2, 0)


# -- lags and origins -----------------------------------------------------------------------

def test_lags_and_origins_checks():
    got = check_lags(3, 10)
    assert got.dtype == np.int64 and got.tolist() == [0, 1, 2, 3]
    assert check_lags([5, 0, 5, 2], 10).tolist() == [0, 2, 5]
    assert check_lags(np.array([9], dtype=np.int32), 10).tolist() == [9]
    assert check_origins(4) == 4 and check_origins(np.int64(1)) == 1


@pytest.mark.parametrize("lags, match", [
    (10, "largest lag allowed is 9"),
    ([3, 12], "largest lag allowed is 9"),
    (-1, "lags.*>= 0"),
    ([2, -1], "lags.*>= 0"),
    ([0.5], "lags must be"),
    (2.0, "lags must be"),
    ([True], "lags must be"),
    ("3", "lags must be"),
    ([], "lags"),
])
def test_bad_lags_are_a_clear_error(lags, match):
    with pytest.raises(ValueError, match=match):
        check_lags(lags, 10)


@pytest.mark.parametrize("origins", [0, -2, 1.5, True, "2", None])
def test_bad_origins_are_a_clear_error(origins):
    with pytest.raises(ValueError, match="origins"):
        check_origins(origins)


def test_time_correlation_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        time_correlation(np.zeros((5, 2)), np.zeros((5, 3)), lags=[0])
    with pytest.raises(ValueError, match="largest lag allowed is 4"):
        time_correlation(np.zeros(5), lags=[5])


# -- unwrap_positions -----------------------------------------------------------------------

@pytest.mark.parametrize("dims", [[20.0, 22.0, 25.0, 90, 90, 90],
                                  [20.0, 21.0, 23.0, 70, 80, 100]])
def test_unwrap_equals_mdanalysis_nojump(dims):
    """Atoms diffusing across the box, wrapped into it: made whole as NoJump makes them,
    and equal to the true (never wrapped) displacements."""
    from MDAnalysis.transformations.nojump import NoJump

    rng = np.random.default_rng(2)
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    frac = rng.random((1, 60, 3)) + np.cumsum(rng.normal(0, 0.04, (50, 60, 3)), axis=0)
    true = frac @ h
    wrapped = np.mod(frac, 1.0) @ h
    crossed = np.any(np.floor(frac) != np.floor(frac[:1]), axis=(0, 2))
    assert crossed.sum() > 20  # the test means something: many atoms leave the box
    u = _universe(wrapped, [dims] * 50)
    ours = unwrap_positions(u.trajectory.timeseries(order="fac"), [dims] * 50)
    assert ours.dtype == np.float64 and ours.shape == (50, 60, 3)
    u.trajectory.add_transformations(NoJump())
    ref = np.array([ts.positions.astype(np.float64) for ts in u.trajectory])
    np.testing.assert_allclose(ours, ref, atol=2e-3)  # (NoJump works in float32)
    np.testing.assert_allclose(ours - ours[0], true - true[0], atol=2e-3)


def test_unwrap_refuses_a_stride_too_long():
    rng = np.random.default_rng(3)
    x = rng.random((1, 10, 3)) * 20.0 + np.cumsum(rng.normal(0, 0.1, (3, 10, 3)), axis=0)
    x[2, 0] = x[1, 0] + [(MAX_STEP_FRACTION + 0.05) * 20.0, 0.0, 0.0]
    box = [[20.0, 20.0, 20.0, 90, 90, 90]] * 3
    with pytest.raises(ValueError, match="step=1"):
        unwrap_positions(np.mod(x, 20.0), box)
    # a step just below the limit is accepted and unwrapped
    x[2, 0] = x[1, 0] + [(MAX_STEP_FRACTION - 0.05) * 20.0, 0.0, 0.0]
    out = unwrap_positions(np.mod(x, 20.0), box)
    np.testing.assert_allclose(out[2, 0] - out[1, 0], x[2, 0] - x[1, 0], atol=1e-9)


def test_unwrap_refuses_a_stride_too_long_in_a_triclinic_box():
    """The limit is a fraction of the smallest perpendicular width, not of an edge."""
    dims = [20.0, 20.0, 20.0, 90, 90, 50]  # a-b plane sheared: width along y is 20 sin 50
    h = triclinic_vectors(np.array(dims, dtype=np.float32)).astype(np.float64)
    width = 20.0 * np.sin(np.radians(50.0))
    x = np.tile(np.array([[[5.0, 5.0, 5.0]]]), (2, 1, 1))
    x[1, 0, 1] += (MAX_STEP_FRACTION + 0.03) * width  # below 0.35 of the edge, above width's
    assert (MAX_STEP_FRACTION + 0.03) * width < MAX_STEP_FRACTION * 20.0
    frac = x @ np.linalg.inv(h)
    with pytest.raises(ValueError, match="save frames more often"):
        unwrap_positions(np.mod(frac, 1.0) @ h, [dims] * 2)


def test_unwrap_bad_input():
    with pytest.raises(ValueError, match="positions must be"):
        unwrap_positions(np.zeros((3, 4)), np.zeros((3, 6)))
    with pytest.raises(ValueError, match="dimensions"):
        unwrap_positions(np.zeros((2, 4, 3)), [[0, 0, 0, 90, 90, 90]] * 2)
