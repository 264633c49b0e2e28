"""The direct k-space sum on the GPU (csrc/cuda/kspace.cu). Skips without a CUDA build and a GPU.

The GPU's amplitudes must agree with the CPU's within ``GPU_TOLERANCE * sqrt(N_a)`` (1e-12;
both lie within ~1.5e-14 sqrt(N_a) of the exact sum: the H100 run of 2026-11-25 measured
|GPU - CPU| <= 1.1e-13 sqrt(N_a), benchmarks/NOTES.md) and with the float64 NumPy sum
computed here, and be the same, bit for bit, on every call.
"""

import pickle

import numpy as np
import pytest
from conftest import requires_gpu

from mdakit_fastrdf.engine.kspace import GPU_TOLERANCE, KSpaceEngine, reciprocal_vectors

pytestmark = [pytest.mark.gpu, requires_gpu]

TRICLINIC = np.array([[24.0, 0.0, 0.0], [7.0, 22.0, 0.0], [-5.0, 6.0, 26.0]])
ORTHO = np.diag([31.0, 29.0, 27.0])


def _system(seed, box, sizes, spread=1.6):
    rng = np.random.default_rng(seed)
    s = rng.random((int(sum(sizes)), 3)) * spread - 0.3
    return s @ box, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _numpy(positions, offsets, box, n):
    k = 2 * np.pi * n.astype(np.float64) @ np.linalg.inv(box).T
    phase = np.exp(1j * (np.asarray(positions, np.float64) @ k.T))
    return np.stack([phase[offsets[a]:offsets[a + 1]].sum(0) for a in range(len(offsets) - 1)])


@pytest.mark.parametrize("box", [ORTHO, TRICLINIC], ids=["ortho", "triclinic"])
@pytest.mark.parametrize("sizes", [[1], [37, 0, 500], [4000, 2999]])
def test_gpu_against_cpu_and_numpy(box, sizes):
    positions, offsets = _system(1, box, sizes)
    n, _ = reciprocal_vectors(box, 2.5)
    gpu = KSpaceEngine(device="cuda").amplitudes(positions, offsets, box, n)
    cpu = KSpaceEngine(device="cpu").amplitudes(positions, offsets, box, n)
    ref = _numpy(positions, offsets, box, n)
    scale = np.sqrt(np.maximum(np.diff(offsets), 1))[:, None]
    assert np.all(np.abs(gpu - cpu) <= GPU_TOLERANCE * scale)
    assert np.all(np.abs(gpu - ref) <= 1e-12 * scale)


def test_gpu_deterministic_and_reuses_its_state():
    positions, offsets = _system(2, TRICLINIC, [3000, 1000])
    n, _ = reciprocal_vectors(TRICLINIC, 3.0)
    eng = KSpaceEngine(device="cuda")
    first = eng.amplitudes(positions, offsets, TRICLINIC, n)
    assert eng.device_used.startswith("cuda")
    for _ in range(3):
        again = eng.amplitudes(positions, offsets, TRICLINIC, n)
        assert np.array_equal(again.view(np.float64), first.view(np.float64))
    # another vector list and a smaller system on the same (grown) buffers
    n2, _ = reciprocal_vectors(TRICLINIC, 1.0)
    small = eng.amplitudes(positions[:10], [0, 10], TRICLINIC, n2)
    ref = _numpy(positions[:10], np.array([0, 10]), TRICLINIC, n2)
    assert np.all(np.abs(small - ref) <= 1e-12 * np.sqrt(10))


def test_gpu_many_super_chunks_and_any_vectors():
    """A frame large enough for many super-chunks per species, negative and repeated
    vectors, and k = 0."""
    positions, offsets = _system(3, ORTHO, [60000, 5])
    rng = np.random.default_rng(3)
    n = rng.integers(-9, 10, size=(500, 3)).astype(np.int32)
    n[0] = 0
    n[1] = n[2]
    gpu = KSpaceEngine(device="cuda").amplitudes(positions, offsets, ORTHO, n)
    cpu = KSpaceEngine(device="cpu").amplitudes(positions, offsets, ORTHO, n)
    scale = np.sqrt(np.diff(offsets))[:, None]
    assert np.all(np.abs(gpu - cpu) <= GPU_TOLERANCE * scale)
    np.testing.assert_array_equal(gpu[:, 0], [60000, 5])


def test_auto_takes_the_gpu_and_pickles():
    positions, offsets = _system(4, ORTHO, [100])
    n, _ = reciprocal_vectors(ORTHO, 1.0)
    eng = KSpaceEngine(device="auto")
    a = eng.amplitudes(positions, offsets, ORTHO, n)
    assert eng.device_used == "cuda:0"
    eng2 = pickle.loads(pickle.dumps(eng))
    assert eng2.device_used is None
    assert np.array_equal(eng2.amplitudes(positions, offsets, ORTHO, n), a)


def test_gpu_bad_input_is_checked_before_the_device():
    positions, offsets = _system(5, ORTHO, [10])
    eng = KSpaceEngine(device="cuda")
    with pytest.raises(ValueError, match="M = 0"):
        eng.amplitudes(positions, offsets, ORTHO, np.zeros((0, 3), np.int32))
    bad = positions.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        eng.amplitudes(bad, offsets, ORTHO, np.array([[1, 0, 0]], np.int32))
