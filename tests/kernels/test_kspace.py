"""The direct k-space sum (``mdakit_fastrdf.engine.kspace``, csrc/cpu/kspace*.cpp) on the CPU.

References are computed here, independently of the code under test:

* amplitudes: the float64 NumPy direct sum ``exp(1j * positions @ k.T)`` with
  ``k = 2 pi n inv(B).T``, and for the error bound the same sum in extended precision
  (``numpy.longdouble``, 64-bit mantissa on x86);
* ``reciprocal_vectors``: brute-force enumeration of every index triple in a generous cube;
* S(k) of the adk water oxygens: freud's ``StaticStructureFactorDirect`` on the same frame,
  bin averages over the vectors freud uses (see ``freud_vectors``).

The bound checked everywhere is ``|A - A_ref| <= 1e-12 sqrt(N_a)`` (docs/design.rst, "Direct
k-space sum").
"""

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdakit_fastrdf.engine import _cpu_module, _cuda_module
from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors, wave_vectors

ORTHO = np.diag([23.0, 27.5, 31.0])
TRICLINIC = np.array([[24.0, 0.0, 0.0], [7.0, 22.0, 0.0], [-5.0, 6.0, 26.0]])
BOUND = 1e-12


def reference_amplitudes(positions, offsets, box, n, dtype=np.float64):
    """sum_j exp(i k . r_j) per species by NumPy, k = 2 pi n B^-T."""
    pos = np.asarray(positions, dtype=np.float64).astype(dtype)
    k = (2 * np.pi * np.asarray(n, np.float64) @ np.linalg.inv(box).T).astype(dtype)
    phase = np.exp(1j * (pos @ k.T)) if dtype == np.float64 else (
        np.cos(pos @ k.T) + 1j * np.sin(pos @ k.T))
    return np.stack([phase[offsets[a]:offsets[a + 1]].sum(axis=0) for a in range(len(offsets) - 1)])


def brute_force_vectors(box, q_max, q_min=0.0):
    """Every index triple of the half space with q_min < |k| <= q_max, from a cube that is
    certainly large enough (|n_c| <= q_max * |a_c| / 2 pi, plus a margin)."""
    bound = int(np.ceil(q_max * np.linalg.norm(box, axis=1).max() / (2 * np.pi))) + 2
    r = np.arange(-bound, bound + 1)
    n = np.stack(np.meshgrid(r, r, r, indexing="ij"), axis=-1).reshape(-1, 3)
    half = (n[:, 0] > 0) | ((n[:, 0] == 0) & (n[:, 1] > 0)) | (
        (n[:, 0] == 0) & (n[:, 1] == 0) & (n[:, 2] > 0))
    n = n[half]
    q = np.linalg.norm(2 * np.pi * n @ np.linalg.inv(box).T, axis=1)
    keep = (q > q_min) & (q <= q_max)
    return n[keep], q[keep]


def random_system(rng, box, sizes, spread=1.6):
    """Positions of len(sizes) species, fractional coordinates in [-0.3, spread - 0.3) (so
    atoms outside the cell too)."""
    n = int(sum(sizes))
    s = rng.random((n, 3)) * spread - 0.3
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return s @ box, offsets


# ---------------------------------------------------------------------------------------
# reciprocal_vectors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("box", [ORTHO, TRICLINIC], ids=["ortho", "triclinic"])
@pytest.mark.parametrize("q_min,q_max", [(0.0, 1.3), (0.5, 1.6), (0.0, 0.27)])
def test_reciprocal_vectors_against_brute_force(box, q_min, q_max):
    n, q = reciprocal_vectors(box, q_max, q_min)
    ref_n, ref_q = brute_force_vectors(box, q_max, q_min)
    assert n.dtype == np.int32 and n.shape[1] == 3 and q.dtype == np.float64
    assert len(n) == len(ref_n)
    assert set(map(tuple, n.tolist())) == set(map(tuple, ref_n.tolist()))
    assert np.all(np.diff(q) >= 0)  # sorted by |k|
    np.testing.assert_allclose(q, np.linalg.norm(wave_vectors(box, n), axis=1), rtol=1e-14)
    np.testing.assert_allclose(q, np.sort(ref_q), rtol=1e-14)
    # one of each pair +-k, never k = 0
    keys = set(map(tuple, n.tolist()))
    assert not any(tuple((-v).tolist()) in keys for v in n)
    assert not np.any(np.all(n == 0, axis=1))


def test_reciprocal_vectors_of_a_cube_count_lattice_points():
    # |k| <= 2 pi sqrt(3) / L: the 26 neighbours of the origin in the simple cubic lattice
    n, q = reciprocal_vectors(np.diag([10.0, 10.0, 10.0]), 2 * np.pi * np.sqrt(3) / 10 * (1 + 1e-12))
    assert len(n) == 13
    np.testing.assert_allclose(np.sort(np.unique(np.round(q * 10 / (2 * np.pi), 12) ** 2)), [1, 2, 3])


@pytest.mark.parametrize("kw,match", [
    ({"q_max": 0.0}, "q_max"),
    ({"q_max": -1.0}, "q_max"),
    ({"q_max": np.nan}, "q_max"),
    ({"q_max": 1.0, "q_min": 1.0}, "q_min"),
    ({"q_max": 1.0, "q_min": -0.1}, "q_min"),
])
def test_reciprocal_vectors_bad_q(kw, match):
    with pytest.raises(ValueError, match=match):
        reciprocal_vectors(ORTHO, **kw)


def test_reciprocal_vectors_bad_box():
    with pytest.raises(ValueError, match="zero volume"):
        reciprocal_vectors(np.array([[10.0, 0, 0], [20.0, 0, 0], [0, 0, 10.0]]), 1.0)
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        reciprocal_vectors([10.0, 10.0, 10.0, 90, 90, 90], 1.0)
    with pytest.raises(ValueError, match="finite"):
        reciprocal_vectors(np.diag([10.0, np.inf, 10.0]), 1.0)


# ---------------------------------------------------------------------------------------
# amplitudes against NumPy
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("box", [ORTHO, TRICLINIC], ids=["ortho", "triclinic"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_amplitudes_against_numpy(box, dtype):
    rng = np.random.default_rng(5)
    positions, offsets = random_system(rng, box, [300, 1, 0, 457])
    positions = positions.astype(dtype)
    n, _ = reciprocal_vectors(box, 2.2)
    amp = KSpaceEngine(device="cpu").amplitudes(positions, offsets, box, n)
    ref = reference_amplitudes(positions, offsets, box, n)
    assert amp.shape == (4, len(n)) and amp.dtype == np.complex128
    sizes = np.diff(offsets)
    for a in range(4):
        assert np.abs(amp[a] - ref[a]).max() <= BOUND * np.sqrt(max(sizes[a], 1))
    assert np.all(amp[2] == 0)  # the empty species


@pytest.mark.slow  # about 5 s
def test_error_bound_against_extended_precision():
    """The error itself, against a reference ~2000 times more precise than float64: far
    below the bound, and as small as the float64 NumPy sum's own error."""
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("numpy.longdouble is not extended precision on this platform")
    rng = np.random.default_rng(11)
    box = TRICLINIC
    positions, offsets = random_system(rng, box, [3000], spread=1.0)
    n, _ = reciprocal_vectors(box, 3.0)
    amp = KSpaceEngine(device="cpu").amplitudes(positions, offsets, box, n)[0]
    ref = reference_amplitudes(positions, offsets, box, n, dtype=np.longdouble)[0]
    err = np.abs(amp - ref.astype(np.complex128)).max() / np.sqrt(3000)
    assert err <= 1e-13, err  # measured 0.9-1.6e-14, as NumPy's float64 sum (benchmarks/NOTES.md)


def test_single_phases_against_extended_precision():
    """Each amplitude of a one-atom species is one phase e1(n1) e2(n2) e3(n3): the tables
    themselves (sin/cos seeds every 16 rows, the recurrence between them, the products).
    Boxes of powers of two make the fractional coordinates exact, so the reference (long
    double phases of the same s) measures the tables alone: within the per-term bound of
    docs/design.rst ("Error": ~16 (sqrt 5 + 2) u per entry, three products more, ~1e-14;
    measured 1.0e-14 for |n| up to 40)."""
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("numpy.longdouble is not extended precision on this platform")
    rng = np.random.default_rng(3)
    lengths = np.array([8.0, 8.0, 4.0])
    positions = (rng.random((300, 3)) * 6 - 3) * lengths  # atoms in and out of the cell
    offsets = np.arange(301, dtype=np.int64)
    r = np.arange(-40, 41)
    n = np.stack(np.meshgrid(r, [0, 1, -3, 17], [0, 2, -33], indexing="ij"),
                 axis=-1).reshape(-1, 3).astype(np.int32)
    amp = KSpaceEngine(device="cpu").amplitudes(positions, offsets, np.diag(lengths), n)
    s = positions / lengths
    phase = (s - np.rint(s)).astype(np.longdouble) @ n.astype(np.longdouble).T
    err_re = np.abs(amp.real - np.cos(2 * np.pi * phase).astype(np.float64))
    err_im = np.abs(amp.imag - np.sin(2 * np.pi * phase).astype(np.float64))
    assert max(err_re.max(), err_im.max()) <= 2e-14


def test_quarter_turns_are_exact():
    """Atoms at quarter cells: every phase is a power of i, and the tables give it exactly
    (a quarter turn is reduced exactly, leaving sin 0 and cos 0), so every amplitude is the
    exact sum of powers of i."""
    box = np.diag([8.0, 8.0, 8.0])
    positions = np.array([[2, 4, -2], [0, 0, 0], [6, 2, 4], [-2, -4, 10], [2, 2, 2]], float)
    offsets = np.array([0, 1, 2, 3, 5], dtype=np.int64)
    r = np.arange(-20, 21)
    n = np.stack(np.meshgrid(r, [0, 1, -5, 16], [-17, 0, 3], indexing="ij"),
                 axis=-1).reshape(-1, 3).astype(np.int32)
    amp = KSpaceEngine(device="cpu").amplitudes(positions, offsets, box, n)
    quarters = np.rint(4 * (positions / 8.0) @ n.T).astype(np.int64) % 4  # i^quarters
    powers = np.array([1, 1j, -1, -1j])[quarters]
    exact = np.stack([powers[offsets[a]:offsets[a + 1]].sum(axis=0) for a in range(4)])
    assert np.array_equal(amp, exact)


@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=4).filter(lambda s: sum(s) > 0),
    lengths=st.tuples(*[st.floats(5.0, 40.0)] * 3),
    tilt=st.tuples(*[st.floats(-0.45, 0.45)] * 3),
    m=st.integers(1, 60),
    reach=st.integers(1, 12),
)
def test_amplitudes_hypothesis(seed, sizes, lengths, tilt, m, reach):
    """Any box (orthorhombic to strongly triclinic), species (empty ones too), any integer
    vectors (negative, repeated, k = 0)."""
    rng = np.random.default_rng(seed)
    lx, ly, lz = lengths
    box = np.array([[lx, 0, 0], [tilt[0] * lx, ly, 0], [tilt[1] * lx, tilt[2] * ly, lz]])
    positions, offsets = random_system(rng, box, sizes)
    n = rng.integers(-reach, reach + 1, size=(m, 3)).astype(np.int32)
    if m > 2:
        n[-1] = n[0]  # a repeat
    amp = KSpaceEngine(device="cpu", n_threads=2).amplitudes(positions, offsets, box, n)
    ref = reference_amplitudes(positions, offsets, box, n)
    bound = BOUND * np.sqrt(np.maximum(np.diff(offsets), 1))[:, None]
    assert np.all(np.abs(amp - ref) <= bound)


def test_k_zero_and_symmetry():
    rng = np.random.default_rng(2)
    positions, offsets = random_system(rng, ORTHO, [50, 70])
    n = np.array([[0, 0, 0], [2, -1, 3], [-2, 1, -3]], np.int32)
    amp = KSpaceEngine(device="cpu").amplitudes(positions, offsets, ORTHO, n)
    np.testing.assert_array_equal(amp[:, 0], [50, 70])  # exp(0) summed exactly
    np.testing.assert_allclose(amp[:, 2], amp[:, 1].conj(), atol=1e-12 * np.sqrt(70))


# ---------------------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------------------


def test_thread_count_and_isa_invariance_bitwise():
    rng = np.random.default_rng(3)
    positions, offsets = random_system(rng, TRICLINIC, [700, 301])
    n, _ = reciprocal_vectors(TRICLINIC, 2.5)
    m = _cpu_module()
    first = m.kspace_amplitudes(positions, offsets, TRICLINIC, n, 1, "")
    for isa in m.usable_variants():
        for threads in (1, 2, 3, 7):
            again = m.kspace_amplitudes(positions, offsets, TRICLINIC, n, threads, isa)
            assert np.array_equal(again.view(np.float64), first.view(np.float64)), (isa, threads)
    for threads in (1, 2, 5):
        amp = KSpaceEngine(device="cpu", n_threads=threads).amplitudes(positions, offsets, TRICLINIC, n)
        assert np.array_equal(amp.view(np.float64), first.view(np.float64))


def test_vector_order_does_not_change_values():
    rng = np.random.default_rng(4)
    positions, offsets = random_system(rng, ORTHO, [400])
    n, _ = reciprocal_vectors(ORTHO, 2.0)
    perm = rng.permutation(len(n))
    eng = KSpaceEngine(device="cpu")
    a = eng.amplitudes(positions, offsets, ORTHO, n)
    b = eng.amplitudes(positions, offsets, ORTHO, n[perm])
    assert np.array_equal(a[:, perm], b)


def test_pickle_and_reuse():
    rng = np.random.default_rng(6)
    positions, offsets = random_system(rng, ORTHO, [60, 40])
    n, _ = reciprocal_vectors(ORTHO, 1.5)
    eng = KSpaceEngine(device="cpu", n_threads=1)
    a = eng.amplitudes(positions, offsets, ORTHO, n)
    eng2 = pickle.loads(pickle.dumps(eng))
    assert eng2.device_used is None
    assert np.array_equal(eng2.amplitudes(positions, offsets, ORTHO, n), a)
    assert eng.device_used == "cpu"


# ---------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------


@pytest.fixture
def small():
    rng = np.random.default_rng(7)
    positions, offsets = random_system(rng, ORTHO, [10, 5])
    n, _ = reciprocal_vectors(ORTHO, 1.0)
    return positions, offsets, n


def test_bad_positions(small):
    positions, offsets, n = small
    eng = KSpaceEngine(device="cpu")
    bad = positions.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="positions must be finite.*first indices \\[3\\]"):
        eng.amplitudes(bad, offsets, ORTHO, n)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="finite"):
        eng.amplitudes(bad, offsets, ORTHO, n)
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        eng.amplitudes(positions[:, :2], offsets, ORTHO, n)
    with pytest.raises(TypeError, match="real numbers"):
        eng.amplitudes(positions.astype(complex), offsets, ORTHO, n)


def test_bad_box(small):
    positions, offsets, n = small
    eng = KSpaceEngine(device="cpu")
    flat = np.array([[10.0, 0, 0], [0, 10.0, 0], [5.0, 5.0, 0.0]])
    with pytest.raises(ValueError, match="zero volume"):
        eng.amplitudes(positions, offsets, flat, n)
    with pytest.raises(ValueError, match="zero volume"):
        eng.amplitudes(positions, offsets, np.zeros((3, 3)), n)


def test_no_vectors(small):
    positions, offsets, _ = small
    n, _ = reciprocal_vectors(ORTHO, 0.1)  # below 2 pi / 31
    assert len(n) == 0
    with pytest.raises(ValueError, match="M = 0.*raise q_max"):
        KSpaceEngine(device="cpu").amplitudes(positions, offsets, ORTHO, n)


@pytest.mark.parametrize("offsets,match", [
    ([0, 10], "cover every atom"),
    ([0, 10, 16], "cover every atom"),
    ([1, 15], "cover every atom"),
    ([0, 12, 10, 15], "cover every atom"),
    ([15], "1-d integer array"),
    ([0.0, 15.0], "1-d integer array"),
])
def test_bad_offsets(small, offsets, match):
    positions, _, n = small
    with pytest.raises(ValueError, match=match):
        KSpaceEngine(device="cpu").amplitudes(positions, offsets, ORTHO, n)


def test_bad_n(small):
    positions, offsets, n = small
    eng = KSpaceEngine(device="cpu")
    with pytest.raises(ValueError, match="integer"):
        eng.amplitudes(positions, offsets, ORTHO, n.astype(float))
    with pytest.raises(ValueError, match=r"\(M, 3\)"):
        eng.amplitudes(positions, offsets, ORTHO, n[:, :2])


def test_compiled_checks_for_direct_callers(small):
    positions, offsets, n = small
    m = _cpu_module()
    with pytest.raises(ValueError, match="offsets"):
        m.kspace_amplitudes(positions, np.array([0, 3], np.int64), ORTHO, n, 1, "")
    with pytest.raises(ValueError, match="M = 0"):
        m.kspace_amplitudes(positions, offsets, ORTHO, n[:0], 1, "")
    bad = positions.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        m.kspace_amplitudes(bad, offsets, ORTHO, n, 1, "")
    with pytest.raises(ValueError, match="zero volume"):
        m.kspace_amplitudes(positions, offsets, np.zeros((3, 3)), n, 1, "")


def test_bad_device():
    with pytest.raises(ValueError, match="device"):
        KSpaceEngine(device="gpu")
    with pytest.raises(TypeError, match="n_threads"):
        KSpaceEngine(device="cpu", n_threads=1.5)


@pytest.mark.skipif(_cuda_module() is not None, reason="this build has CUDA kernels")
def test_cuda_without_cuda_build_names_the_cause():
    with pytest.raises(ValueError, match="no CUDA kernels"):
        KSpaceEngine(device="cuda")


def test_auto_without_gpu_runs_on_cpu(small):
    positions, offsets, n = small
    eng = KSpaceEngine(device="auto")
    eng.amplitudes(positions, offsets, ORTHO, n)
    from mdakit_fastrdf.engine import cuda_unavailable_reason
    if _cuda_module() is None or cuda_unavailable_reason() is not None:
        assert eng.device_used == "cpu"


# ---------------------------------------------------------------------------------------
# S(k) against freud
# ---------------------------------------------------------------------------------------


def freud_vectors(box, k_max):
    """The vectors freud 3.4's StaticStructureFactorDirect uses with all k points
    (num_sampled_k_points=0), from its source (freud/diffraction/StaticStructureFactorDirect.cc,
    reciprocal_isotropic): n >= 0 componentwise, n_c < ceil(k_max / (2 pi |b_c|)) with b_c
    its reciprocal vectors (without 2 pi), and n3 below the upper root of its quadratic for
    |k| <= k_max, which it centres at +(k_xy . b_3)/|b_3|^2 (the same in an orthorhombic box,
    where k_xy . b_3 = 0)."""
    rec = np.linalg.inv(box.T)
    limit = np.ceil(k_max / (2 * np.pi) / np.linalg.norm(rec, axis=1)).astype(int)
    b = 2 * np.pi * rec
    a = b[2] @ b[2]
    out = []
    for n1 in range(limit[0]):
        for n2 in range(limit[1]):
            kxy = n1 * b[0] + n2 * b[1]
            centre = (kxy @ b[2]) / a
            disc = centre * centre - (kxy @ kxy - k_max * k_max) / a
            top = int(np.ceil(centre + np.sqrt(disc))) if disc >= 0 else 0
            out.extend((n1, n2, n3) for n3 in range(min(top, limit[2])))
    n = np.array(out, dtype=np.int32)
    q = np.linalg.norm(n @ b, axis=1)
    keep = (q > 0) & (q <= k_max)
    return n[keep], q[keep]


def bin_means(values, q, edges):
    idx = np.digitize(q, edges) - 1
    return np.array([values[idx == b].mean() if np.any(idx == b) else np.nan
                     for b in range(len(edges) - 1)])


def _freud():
    return pytest.importorskip("freud")


def test_structure_factor_orthorhombic_against_freud():
    """An orthorhombic box: freud's vectors are the positive octant, every bin agrees."""
    freud = _freud()
    rng = np.random.default_rng(8)
    box = np.diag([30.0, 36.0, 42.0])
    positions = (rng.random((3000, 3)) @ box).astype(np.float32)
    fbox = freud.box.Box.from_matrix(box.T)
    sf = freud.diffraction.StaticStructureFactorDirect(bins=16, k_max=1.6)
    sf.compute((fbox, fbox.wrap(positions)))
    n, q = reciprocal_vectors(box, 1.6)
    octant = np.all(n >= 0, axis=1)
    ref_n, _ = freud_vectors(box, 1.6)
    assert set(map(tuple, n[octant].tolist())) == set(map(tuple, ref_n.tolist()))
    amp = KSpaceEngine(device="cpu").amplitudes(positions, [0, 3000], box, n[octant])[0]
    ours = bin_means(np.abs(amp) ** 2 / 3000, q[octant], sf.bin_edges)
    np.testing.assert_allclose(ours[1:], sf.S_k[1:], rtol=2e-4)


def test_structure_factor_adk_water_against_freud(adk_water):
    """One frame of the adk water oxygens (11,084 atoms, a triclinic cell): bin averages of
    |A|^2 / N over freud's vectors agree with freud's S(k) (float32 there) to 1e-4 in the
    bins below 0.7 k_max, here 0.05 < k < 1.05 / A. Above that freud 3.4 averages, in this
    cell, over a vector set that its source (as reproduced in freud_vectors) does not give
    and that changes with k_max; the orthorhombic test covers every bin."""
    freud = _freud()
    from MDAnalysis.lib.mdamath import triclinic_vectors

    u = adk_water
    u.trajectory[0]  # the first frame, wherever an earlier test left the shared Universe
    ow = u.select_atoms("name OW")
    box = triclinic_vectors(u.dimensions).astype(np.float64)
    fbox = freud.box.Box.from_matrix(box.T)
    k_max, bins = 1.5, 30
    sf = freud.diffraction.StaticStructureFactorDirect(bins=bins, k_max=k_max)
    sf.compute((fbox, fbox.wrap(ow.positions)))
    n, q = freud_vectors(box, k_max)
    amp = KSpaceEngine(device="cpu").amplitudes(ow.positions, [0, len(ow)], box, n)[0]
    ours = bin_means(np.abs(amp) ** 2 / len(ow), q, sf.bin_edges)
    upto = int(np.searchsorted(sf.bin_edges, 0.7 * k_max + 1e-6)) - 1  # bins below 1.05 / A
    assert upto == 21
    np.testing.assert_allclose(ours[1:upto], sf.S_k[1:upto], rtol=1e-4)
    # every vector of the half space gives the shell average over all directions; that is
    # what mdakit_fastrdf reports (freud's octant is a subset of it in this cell)
    n_all, _ = reciprocal_vectors(box, k_max)
    assert set(map(tuple, n.tolist())) <= set(map(tuple, n_all.tolist()))


# ---------------------------------------------------------------------------------------
# AmplitudesInFlight
# ---------------------------------------------------------------------------------------

def test_amplitudes_in_flight_store_every_frame_in_order():
    """Frames' amplitudes come back in the order asked for, each the engine's own result,
    never more than `depth` in flight; the positions are copied at submit (the caller's
    buffer is reused), and finish() stores the rest."""
    from mdakit_fastrdf.engine.kspace import AmplitudesInFlight

    rng = np.random.default_rng(5)
    box = TRICLINIC
    positions, offsets = random_system(rng, box, [30, 20])
    n, _ = reciprocal_vectors(box, 2.0)
    eng = KSpaceEngine(device="cpu", n_threads=1)
    stored, pending = [], []
    queue = AmplitudesInFlight(eng, lambda key, amp: stored.append((key, amp)), depth=3)
    buffer = np.empty_like(positions)
    frames = [positions + 0.37 * k for k in range(10)]
    for k, frame in enumerate(frames):
        buffer[:] = frame
        queue.submit(k, buffer, offsets, box, n)
        pending.append(k)
        assert len(pending) - len(stored) <= 3
    buffer[:] = np.nan  # (after the submits: the queue kept its own copies)
    queue.finish()
    assert [key for key, _ in stored] == list(range(10))
    for (k, amp), frame in zip(stored, frames):
        assert np.array_equal(amp, eng.amplitudes(frame, offsets, box, n))
    with pytest.raises(RuntimeError, match="after finish"):
        queue.submit(10, positions, offsets, box, n)


def test_amplitudes_in_flight_raise_the_engines_error():
    """A frame the engine refuses raises its error in the caller (at the submit that stores
    it, or at finish), and the thread ends; a bad depth is refused."""
    from mdakit_fastrdf.engine.kspace import AmplitudesInFlight

    box = np.diag([10.0, 10.0, 10.0])
    queue = AmplitudesInFlight(KSpaceEngine(device="cpu"), lambda key, amp: None, depth=1)
    queue.submit(0, [[np.nan, 0, 0]], [0, 1], box, [[1, 0, 0]])
    with pytest.raises(ValueError, match="positions must be finite"):
        queue.finish()
    assert queue._executor is None
    for depth in (0, 1.5, True):
        with pytest.raises(ValueError, match="depth"):
            AmplitudesInFlight(KSpaceEngine(device="cpu"), print, depth=depth)
