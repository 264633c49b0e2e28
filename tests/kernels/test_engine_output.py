"""The engine's output object: one per run of frames, so that a GPU engine never waits.

A GPU engine queues each frame's counts on the device and adds them into the output
object it was given; handed another object it first waits for the device. An analysis
passing a new view of the same counts each frame (InterRDF reshapes its 1-D counts to
(1, nbins)) made every frame wait (8.8 against 6.0 ms a frame of 1M atoms on an H200).
These tests watch the objects the compiled engine receives; they run on the CPU engine,
which takes the same path.
"""

import MDAnalysis as mda
import numpy as np
import pytest

from mdakit_fastrdf import InterRDF, SpeciesRDF
from mdakit_fastrdf.engine import Engine, prepare_box


class _Recorder:
    """Wraps a compiled engine and records the ids of the output arrays it is handed."""

    def __init__(self, impl):
        self.impl, self.outs = impl, []

    def accumulate(self, *args):
        self.outs.append(args[7])
        return self.impl.accumulate(*args)

    def __getattr__(self, name):
        return getattr(self.impl, name)


@pytest.fixture
def recording(monkeypatch):
    made = []
    real = Engine._make_impl

    def make(self, offsets, pairs):
        rec = _Recorder(real(self, offsets, pairs))
        made.append(rec)
        return rec

    monkeypatch.setattr(Engine, "_make_impl", make)
    return made


def _frame(n=50, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3), dtype=np.float32) * np.float32(20.0)


def test_a_view_of_the_same_counts_is_the_previous_object(recording):
    e = Engine(device="cpu")
    counts = np.zeros(10, dtype=np.uint64)
    args = (np.array([0, 50], dtype=np.int64), np.array([[0, 0]], dtype=np.int32),
            np.linspace(0.0, 8.0, 11), prepare_box(np.array([20, 20, 20, 90, 90, 90],
                                                            dtype=np.float32)), None)
    for k in range(3):
        e.accumulate(_frame(seed=k), *args, counts.reshape(1, -1))
    outs = recording[0].outs
    assert all(o is outs[0] for o in outs)
    # the counts are those of three frames added into `counts`
    ref = np.zeros(10, dtype=np.uint64)
    for k in range(3):
        x = _frame(seed=k).astype(np.float64)
        d = x[:, None, :] - x[None, :, :]
        d -= 20.0 * np.round(d / 20.0)
        ref += np.histogram(np.sqrt((d ** 2).sum(-1)).ravel(), bins=np.linspace(0.0, 8.0, 11))[0].astype(np.uint64)
    np.testing.assert_array_equal(counts, ref)


def test_other_memory_is_another_object(recording):
    e = Engine(device="cpu")
    a, b = np.zeros((1, 10), dtype=np.uint64), np.zeros((1, 10), dtype=np.uint64)
    args = (np.array([0, 50], dtype=np.int64), np.array([[0, 0]], dtype=np.int32),
            np.linspace(0.0, 8.0, 11), prepare_box(np.array([20, 20, 20, 90, 90, 90],
                                                            dtype=np.float32)), None)
    e.accumulate(_frame(), *args, a)
    e.accumulate(_frame(), *args, b)
    e.accumulate(_frame(), *args, a[:, :])  # a view of a: a's object again
    outs = recording[0].outs
    assert outs[0] is a and outs[1] is b and outs[2] is not a  # (b was the last)
    np.testing.assert_array_equal(a, 2 * b)


def _universe(n_frames=4, n=60):
    u = mda.Universe.empty(n, n_residues=n, atom_resindex=np.arange(n), trajectory=True)
    u.add_TopologyAttr("name", ["A", "B"] * (n // 2))
    coords = np.stack([_frame(n, seed=k) for k in range(n_frames)])
    u.load_new(coords, format="MEMORY", dimensions=[20, 20, 20, 90, 90, 90])
    return u


@pytest.mark.parametrize("blocks", [None, 2])
def test_interrdf_hands_one_object_per_block(recording, blocks):
    u = _universe()
    r = InterRDF(u.atoms, u.atoms, nbins=20, range=(0.0, 8.0), device="cpu")
    r.run(**({} if blocks is None else {"blocks": blocks}))
    outs = recording[0].outs
    assert len(outs) == 4
    assert len({id(o) for o in outs}) == (1 if blocks is None else 2)


def test_species_rdf_hands_one_object(recording):
    u = _universe()
    SpeciesRDF(u.atoms, by="name", nbins=20, range=(0.0, 8.0), device="cpu").run()
    outs = recording[0].outs
    assert len(outs) == 4 and all(o is outs[0] for o in outs)


# -- a GPU worker sees only its own GPU ---------------------------------------------------

def _gpu_spec(device, engine_device=None, kind="gpu"):
    from mdakit_fastrdf.backends.planning import WorkerSpec

    return WorkerSpec(1, kind, device, (0,), 1, "spawn",
                      engine_device=engine_device if engine_device is not None else device)


@pytest.mark.parametrize(("visible", "device", "want"), [
    (None, "cuda:1", "1"),                       # no list: CUDA's own numbering
    ("3,5", "cuda:1", "5"),                      # the parent's list: its second entry
    ("GPU-aaaa, GPU-bbbb", "cuda:0", "GPU-aaaa"),  # UUIDs
])
def test_gpu_worker_sees_only_its_gpu(monkeypatch, visible, device, want):
    from mdakit_fastrdf.backends import worker

    # (setenv first: monkeypatch then restores this process's own value, which _own_gpu
    # changes directly, whatever it was)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unset-by-the-test")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(worker, "_device_alias", {})
    assert worker._own_gpu(_gpu_spec(device)) == "cuda:0"
    import os

    assert os.environ["CUDA_VISIBLE_DEVICES"] == want
    assert worker._device_alias == {"cuda:0": device}  # reported as the node's GPU


@pytest.mark.parametrize(("visible", "spec"), [
    ("0,1", _gpu_spec("cuda:1", engine_device="cpu")),   # a CPU stand-in of a GPU
    ("0,1", _gpu_spec("cpu", kind="cpu")),               # a CPU worker
    ("0", _gpu_spec("cuda:1")),                          # not in the list: left as asked
])
def test_other_workers_keep_their_devices(monkeypatch, visible, spec):
    from mdakit_fastrdf.backends import worker

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(worker, "_device_alias", {})
    assert worker._own_gpu(spec) == spec.engine_device
    import os

    assert os.environ["CUDA_VISIBLE_DEVICES"] == visible
    assert worker._device_alias == {}
