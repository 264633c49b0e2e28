"""The compiled self parts of the time correlations (engine/displacements.py) against NumPy:
np.histogram of the displacement lengths (its bins, the last one closed) and the sums of
np.sinc, for any number of threads."""

import numpy as np
import pytest

from mdakit_fastrdf.engine.displacements import displacement_histogram, sinc_sums, unwrap


def _walk(frames=30, n=500, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(0.0, 0.4, (frames, n, 3)), axis=0)


def _reference_counts(pos, origins, lag, species, n_species, edges):
    out = np.zeros((n_species, len(edges) - 1), dtype=np.int64)
    for t0 in origins:
        d = np.linalg.norm(pos[t0 + lag] - pos[t0], axis=1)
        for a in range(n_species):
            out[a] += np.histogram(d[species == a], bins=edges)[0]
    return out


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("edges", [np.linspace(0.0, 3.0, 31), np.linspace(0.7, 2.2, 7),
                                   np.arange(31) * 0.1, np.linspace(0.0, 3.0, 31) + 1e-13],
                         ids=["from-0", "a-window", "arange", "shifted"])
def test_counts_are_numpy_histograms(n_threads, edges):
    pos = _walk()
    species = np.arange(pos.shape[1]) % 3
    origins = np.array([0, 2, 3, 7, 20])
    lags = np.array([0, 1, 9, 12])  # (lag 12: origin 20 has no t0 + lag, the others do)
    out = np.zeros((3, len(lags), len(edges) - 1), dtype=np.int64)
    displacement_histogram(pos, origins, lags, species, 3, edges, out, n_threads)
    for j, lag in enumerate(lags):
        np.testing.assert_array_equal(
            out[:, j], _reference_counts(pos, origins[origins + lag < len(pos)], lag, species,
                                         3, edges))
    # it adds to out
    before = out.copy()
    displacement_histogram(pos, origins, lags, species, 3, edges, out, n_threads)
    np.testing.assert_array_equal(out, 2 * before)


def test_lengths_on_the_edges_fall_as_numpy_puts_them():
    """Displacements of exactly an edge's length (0.5, 1.0, ..., the last edge 4.0) and just
    beyond the last: np.histogram's bins (an edge opens its bin; the last bin is closed)."""
    edges = np.linspace(0.0, 4.0, 9)
    lengths = np.array([0.0, 0.5, 1.0, 1.5, 2.5, 3.5, 4.0, 4.0 + 1e-12, 0.49999999999])
    pos = np.zeros((2, len(lengths), 3))
    pos[1, :, 0] = lengths
    out = np.zeros((1, 1, 8), dtype=np.int64)
    displacement_histogram(pos, [0], [1], np.zeros(len(lengths)), 1, edges, out)
    np.testing.assert_array_equal(out[0, 0], np.histogram(lengths, bins=edges)[0])
    assert out.sum() == len(lengths) - 1  # (4 + 1e-12 is outside)


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_sinc_sums_are_numpy_sums_and_do_not_depend_on_threads(n_threads):
    pos = _walk(seed=1)
    species = (np.arange(pos.shape[1]) % 2).astype(np.int32)
    q = np.array([0.3, 1.0, 2.5])
    origins, lags = np.arange(0, 25, 2), np.array([0, 4, 7])
    got = sinc_sums(pos, origins, lags, species, 2, q, n_threads)
    assert got.shape == (2, 3, 3)
    for j, lag in enumerate(lags):
        ref = np.zeros((2, 3))
        for t0 in origins[origins + lag < len(pos)]:
            d = np.linalg.norm(pos[t0 + lag] - pos[t0], axis=1)
            for m, qv in enumerate(q):
                v = np.sinc(qv * d / np.pi)
                for a in range(2):
                    ref[a, m] += v[species == a].sum()
        np.testing.assert_allclose(got[:, j], ref, rtol=1e-12)
    np.testing.assert_array_equal(got, sinc_sums(pos, origins, lags, species, 2, q, 1))
    # no displacement at lag 0: every term is 1
    np.testing.assert_array_equal(got[:, 0], np.full((2, 3), len(origins) * pos.shape[1] / 2))


def test_edges_not_linspace_s_are_its_bins_too():
    """The two binning paths: edges equal to numpy.linspace's (computed in the loop) and
    any other increasing edges (read): lengths on and one ulp either side of every edge."""
    linspace = np.linspace(0.3, 2.9, 27)
    other = linspace.copy()
    other[5:20] = np.nextafter(other[5:20], np.inf)  # (no longer linspace's, still increasing)
    for edges in (linspace, other):
        lengths = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, 9)])
        pos = np.zeros((2, len(lengths), 3))
        pos[1, :, 1] = lengths
        out = np.zeros((1, 1, len(edges) - 1), dtype=np.int64)
        displacement_histogram(pos, [0], [1], np.zeros(len(lengths)), 1, edges, out)
        np.testing.assert_array_equal(out[0, 0], np.histogram(lengths, bins=edges)[0])


@pytest.mark.parametrize("edges", [np.linspace(1000.0, 1000.5, 51), np.linspace(0.0, 1e-9, 11),
                                   np.array([0.0, 0.1, 0.5, 0.6, 2.0]),
                                   np.linspace(0.0, 15.0, 1501)],
                         ids=["far-from-0", "tiny", "unequal", "fine"])
def test_lengths_near_every_edge_fall_as_numpy_puts_them(edges):
    """Lengths on every edge, a few ulp either side, and at random within the range, for
    edges far from 0, tiny, unequal (every length by the edges themselves) and many."""
    rng = np.random.default_rng(8)
    near = [np.nextafter(edges, -np.inf), edges, np.nextafter(edges, np.inf)]
    for _ in range(3):
        near.append(np.nextafter(near[-1], np.inf))
    lengths = np.concatenate(near + [rng.uniform(edges[0] - 0.1 * (edges[-1] - edges[0]),
                                                 edges[-1] * 1.1, 5000)])
    lengths = lengths[lengths >= 0]
    pos = np.zeros((2, len(lengths), 3))
    pos[1, :, 0] = lengths  # (a length along x is exactly itself)
    out = np.zeros((1, 1, len(edges) - 1), dtype=np.int64)
    displacement_histogram(pos, [0], [1], np.zeros(len(lengths)), 1, edges, out)
    np.testing.assert_array_equal(out[0, 0], np.histogram(lengths, bins=edges)[0])


def test_nan_and_huge_displacements_are_not_counted():
    pos = np.zeros((2, 6, 3))
    pos[1, :, 0] = [np.nan, np.inf, -np.inf, 1e300, 0.5, 2.5]
    edges = np.linspace(0.0, 3.0, 7)
    out = np.zeros((1, 1, 6), dtype=np.int64)
    displacement_histogram(pos, [0], [1], np.zeros(6), 1, edges, out)
    np.testing.assert_array_equal(out[0, 0], [0, 1, 0, 0, 0, 1])


def test_sinc_of_each_displacement_is_numpy_s_within_4_ulp():
    """One atom a species: the sums are each displacement's sin(q d)/(q d), against NumPy's
    sin in float64, over arguments from 0 through 2^19 (the vectorised reduction) and past
    it (the library's sin), near multiples of pi/2 included."""
    rng = np.random.default_rng(3)
    y = np.concatenate([[0.0, 1e-300, 1e-8, 0.5, np.pi / 4, np.pi / 2, np.pi, 3 * np.pi / 2],
                        np.arange(1, 400) * (np.pi / 2),
                        np.nextafter(np.arange(1, 400) * (np.pi / 2), 0),
                        rng.uniform(0, 40, 3000), rng.uniform(0, 2.0**19, 3000),
                        rng.uniform(2.0**19, 1e7, 200)])
    pos = np.zeros((2, len(y), 3))
    pos[1, :, 2] = y  # (q = 1: the arguments are the lengths)
    got = sinc_sums(pos, [0], [1], np.arange(len(y)), len(y), [1.0])[:, 0, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = np.where(y == 0, 1.0, np.sin(y) / y)
    # within 4 units in the last place of NumPy's value (measured: 2 at most, 16 % of them
    # not bit-equal: the sine is within about one ulp of the correctly rounded one, and the
    # quotient rounds once more)
    bad = np.abs(got - ref) > 4 * np.spacing(np.abs(ref))
    assert not bad.any(), (y[bad][:5], got[bad][:5], ref[bad][:5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unwrap_is_a_float64_numpy_loop_in_changing_triclinic_boxes(dtype):
    """The compiled unwrap against the same steps in NumPy, float64: a box that changes
    every frame (NPT) and is triclinic; for any number of threads, the same bits."""
    rng = np.random.default_rng(4)
    frames, n = 12, 301
    h0 = np.array([[20.0, 0, 0], [3.0, 18.0, 0], [-2.0, 4.0, 22.0]])
    boxes = np.stack([h0 * (1 + 0.01 * np.sin(t)) for t in range(frames)])
    frac = np.cumsum(rng.normal(0, 0.02, (frames, n, 3)), axis=0) + rng.random((1, n, 3))
    wrapped = (np.mod(frac, 1.0) @ boxes).astype(dtype)  # (each frame in its own box)
    inv = np.linalg.inv(boxes)
    ref = np.empty(wrapped.shape)
    ref[0] = wrapped[0]
    longest = np.zeros(frames)
    for t in range(1, frames):
        df = (wrapped[t].astype(np.float64) - wrapped[t - 1]) @ inv[t]
        df -= np.round(df)
        step = df @ boxes[t]
        ref[t] = ref[t - 1] + step
        longest[t] = np.sqrt((step ** 2).sum(axis=1).max())
    got = [unwrap(wrapped, boxes, inv, nt) for nt in (1, 2, 3)]
    np.testing.assert_allclose(got[0][0], ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got[0][1], longest, rtol=1e-12)
    for out, top in got[1:]:
        np.testing.assert_array_equal(out, got[0][0])
        np.testing.assert_array_equal(top, got[0][1])


def test_bad_input_is_a_clear_error():
    pos = _walk(frames=5, n=10)
    sp = np.zeros(10)
    out = np.zeros((1, 1, 4), dtype=np.int64)
    edges = np.linspace(0, 1, 5)
    with pytest.raises(ValueError, match="origins"):
        displacement_histogram(pos, [3, 1], [1], sp, 1, edges, out)
    with pytest.raises(ValueError, match="lags"):
        displacement_histogram(pos, [0], [-1], sp, 1, edges, out)
    with pytest.raises(ValueError, match="species"):
        displacement_histogram(pos, [0], [1], np.full(10, 2), 1, edges, out)
    with pytest.raises(ValueError, match="out"):
        displacement_histogram(pos, [0], [1], sp, 1, edges, np.zeros((1, 1, 4)))
    with pytest.raises(ValueError, match="out"):
        displacement_histogram(pos, [0], [1, 2], sp, 1, edges, out)
    with pytest.raises(ValueError, match="edges"):
        displacement_histogram(pos, [0], [1], sp, 1, edges[::-1], out)
    with pytest.raises(ValueError, match="positions"):
        sinc_sums(pos[:, :, :2], [0], [1], sp, 1, [1.0])
    with pytest.raises(ValueError, match="positions"):
        unwrap(pos[:, :, :2], np.zeros((5, 3, 3)), np.zeros((5, 3, 3)))
    with pytest.raises(ValueError, match="boxes"):
        unwrap(pos, np.zeros((4, 3, 3)), np.zeros((5, 3, 3)))
