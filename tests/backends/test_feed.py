"""Readers apart from compute workers (the node backend's feed, backends/feed.py).

A fed run computes the same parts, frames and order as a run whose workers read their own
frames, so every result is the same bit for bit; the integer counts equal serial's. GPU
workers are CPU stand-ins here (spawned, bound to made-up devices, engines on the CPU).
"""

import glob
import os
import tempfile
import time
import warnings

import numpy as np
import pytest

from conftest import make_universe, random_positions_in_box, requires_gpu

from mdakit_fastrdf import (InterRDF, InterRDF_s, IntermediateScattering, LateralRDF,
                            SpeciesRDF, VanHove)
from mdakit_fastrdf.backends import NodeBackend, WorkerDiedError, plan_workers
from mdakit_fastrdf.backends.feed import Ring
from mdakit_fastrdf.backends.topology import NodeTopology, detect_topology
from mdakit_fastrdf.engine import NO_BOX, ORTHO, ORTHO_SCALED, TRICLINIC


def _interrdf(u):
    ow = u.select_atoms("name OW")[:500]
    return InterRDF(ow, ow, nbins=60, range=(0.0, 12.0), exclusion_block=(1, 1))


def _interrdf_centres(u):
    water = u.select_atoms("resname SOL and not name MW")[:600]
    return InterRDF(water, water, nbins=40, range=(0.0, 12.0), compound="residues",
                    unwrap=False, exclusion_block=(1, 1))


def _interrdf_s(u):
    ow = u.select_atoms("name OW")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return InterRDF_s(u, [[ow[:20], ow[20:50]], [ow[50:60], ow[50:60]]], nbins=40,
                          range=(0.0, 10.0))


def _species(u):
    return SpeciesRDF(u.atoms[:700], by="name", nbins=50, range=(0.0, 10.0))


def _lateral(u):
    ow = u.select_atoms("name OW")[:400]
    return LateralRDF(ow, ow, nbins=40, range=(0.0, 10.0), exclusion_block=(1, 1))


ANALYSES = [
    pytest.param(_interrdf, id="InterRDF"),
    pytest.param(_interrdf_centres, id="InterRDF-centres"),
    pytest.param(_interrdf_s, id="InterRDF_s"),
    pytest.param(_species, id="SpeciesRDF"),
    pytest.param(_lateral, id="LateralRDF"),
]


@pytest.fixture(scope="module")
def npt_universe():
    """In memory: 8 frames, a triclinic box that changes every frame."""
    rng = np.random.default_rng(5)
    n_frames, n = 8, 240
    dims = np.array([[22.0 + 0.4 * f, 23.0, 24.0 - 0.2 * f, 82.0, 96.0, 104.0]
                     for f in range(n_frames)])
    coords = np.stack([random_positions_in_box(rng, n, dims[f])[0] for f in range(n_frames)])
    return make_universe(coords, dims, atoms_per_residue=3)


def _standins(readers="auto", **kw):
    """One GPU worker (a CPU stand-in) and readers on the cores of this machine."""
    topo = NodeTopology(detect_topology().groups, n_gpus=1, source="test",
                        gpu_source="stand-ins")
    return NodeBackend(gpus=[0], topology=topo, _gpu_standin=True, readers=readers, **kw)


def _ring_files():
    return set(glob.glob("/dev/shm/mdakit-fastrdf-feed-*")
               + glob.glob(os.path.join(tempfile.gettempdir(), "mdakit-fastrdf-feed-*")))


def _same(x, y, key, exact_float):
    if isinstance(x, (list, tuple)):
        assert len(x) == len(y), key
        for u, v in zip(x, y):
            _same(u, v, key, exact_float)
    elif isinstance(x, (np.ndarray, float, int, np.floating, np.integer)):
        if exact_float or np.asarray(x).dtype.kind in "iub":
            np.testing.assert_array_equal(x, y, err_msg=key)
        else:
            np.testing.assert_allclose(x, y, rtol=1e-13, err_msg=key)


def _assert_same_results(a, b, exact_float=True):
    assert a.results.keys() == b.results.keys()
    for k in a.results:
        _same(a.results[k], b.results[k], k, exact_float)
    np.testing.assert_array_equal(a.frames, b.frames)
    np.testing.assert_array_equal(a.times, b.times)


# -- the plan ---------------------------------------------------------------------------------


def test_plan_gives_free_cpus_to_readers_beside_gpus():
    topo = NodeTopology.simple([16], n_gpus=1)
    specs = plan_workers(topo)
    kinds = [s.kind for s in specs]
    assert kinds == ["gpu"] + ["reader"] * 14
    # the GPU worker: 2 cores and threads for its host work (what keeps a GPU busy)
    assert len(specs[0].cpus) == 2 and specs[0].n_threads == 2
    readers = [s for s in specs if s.kind == "reader"]
    gpu_cpus = set(specs[0].cpus)
    assert all(len(s.cpus) == 1 and not gpu_cpus & set(s.cpus) for s in readers)
    assert len({s.cpus for s in readers}) == 14  # each its own cpu
    one = plan_workers(topo, gpu_threads=1)
    assert len(one[0].cpus) == 1 and [s.kind for s in one].count("reader") == 15
    assert len(plan_workers(topo, readers=0)[0].cpus) == 1  # unfed: one core, as before
    # CPU workers on request beside the readers (sharing their cores at idle priority),
    # and no readers for an analysis that cannot be fed
    hybrid = [s.kind for s in plan_workers(topo, hybrid=True)]
    assert hybrid.count("cpu") == 2 and hybrid.count("reader") == 14
    assert [s.kind for s in plan_workers(topo, feedable=False)][:1] == ["gpu"]
    assert "reader" not in [s.kind for s in plan_workers(topo, feedable=False)]
    assert "cpu" in [s.kind for s in plan_workers(topo, feedable=False)]
    # two sockets, two GPUs: readers on both sockets
    specs = plan_workers(NodeTopology.simple([8, 8], n_gpus=2))
    assert [s.kind for s in specs] == ["gpu", "gpu"] + ["reader"] * 12
    assert [len(s.cpus) for s in specs[:2]] == [2, 2]
    assert {c < 8 for s in specs[:2] for c in s.cpus} == {True, False}  # one per socket


def test_plan_without_gpus_has_no_readers_unless_asked():
    topo = NodeTopology.simple([4])
    assert "reader" not in [s.kind for s in plan_workers(topo)]
    specs = plan_workers(topo, readers=3, cpu_workers=1)
    assert [s.kind for s in specs] == ["cpu", "reader", "reader", "reader"]
    # more readers than cores: they share the cores, and the CPU worker shares them too
    specs = plan_workers(NodeTopology.simple([2]), readers=3, cpu_workers=1)
    assert [s.kind for s in specs] == ["cpu"] + ["reader"] * 3


def test_plan_readers_errors():
    topo = NodeTopology.simple([4], n_gpus=1)
    with pytest.raises(ValueError, match="readers=2: this analysis cannot take its frames"):
        plan_workers(topo, readers=2, feedable=False)
    with pytest.raises(ValueError, match="readers"):
        plan_workers(topo, readers=-1)
    with pytest.raises(TypeError, match="readers"):
        plan_workers(topo, readers=1.5)
    with pytest.raises(ValueError, match="gpu_threads"):
        plan_workers(topo, gpu_threads=0)


def _spec(rank, kind):
    from mdakit_fastrdf.backends.planning import WorkerSpec

    return WorkerSpec(rank, kind, "cuda:0" if kind == "gpu" else "cpu", (rank,), 1, "fork")


def test_feed_sizes():
    """The rings follow the documented rule (run_feed.feed_sizes): the fast workers (the
    GPU workers, else all) get max(3, readers/fast + 2, min(1 GiB of slots, their share of
    the frames + 1, 1024)) slots and read ahead min(slots, 2 readers/fast + 2) frames; a
    CPU worker beside GPU workers gets 3 slots and reads 2 ahead."""
    from mdakit_fastrdf.backends.run_feed import FEED_RING_BYTES, feed_sizes

    one_m = 12 * 1_000_000 + 256  # a slot of 1M atoms: 89 fit in 1 GiB
    assert FEED_RING_BYTES // one_m == 89
    gpus = [_spec(0, "gpu"), _spec(1, "gpu")]
    # 2 GPUs, 28 readers, 600 frames of 1M atoms: the 1 GiB cap
    assert feed_sizes(gpus, 28, 600, one_m) == ({0: 89, 1: 89}, {0: 30, 1: 30})
    # a short run: a GPU's share of 40 frames (21), read ahead at most that
    assert feed_sizes(gpus, 28, 40, one_m) == ({0: 21, 1: 21}, {0: 21, 1: 21})
    # small frames: the share (301) below the byte cap and 1024
    assert feed_sizes(gpus, 28, 600, 12 * 1000 + 256) == ({0: 301, 1: 301}, {0: 30, 1: 30})
    # hybrid: the readers read for the GPU; the CPU workers get small rings
    hybrid = [_spec(0, "gpu"), _spec(1, "cpu"), _spec(2, "cpu")]
    assert feed_sizes(hybrid, 28, 600, one_m) == ({0: 89, 1: 3, 2: 3}, {0: 58, 1: 2, 2: 2})
    # CPU workers alone are all fast; a ring holds at least a slot per reader and two more
    cpus = [_spec(0, "cpu"), _spec(1, "cpu")]
    assert feed_sizes(cpus, 30, 4, one_m) == ({0: 17, 1: 17}, {0: 17, 1: 17})


def test_describe_names_the_readers():
    b = NodeBackend(topology=NodeTopology.simple([8], n_gpus=1), gpus=[0])
    text = b.describe()
    assert "6 reader(s)" in text and "gpu" in text
    assert "reader" not in NodeBackend(topology=NodeTopology.simple([8], n_gpus=1), gpus=[0],
                                       readers=0).describe()
    assert b.n_workers == 1  # readers are not compute workers


# -- the same results ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", ANALYSES)
def test_fed_cpu_worker_equals_unfed_and_serial(adk_water, make):
    """A CPU worker fed by two readers = the same parts read by the worker, bit for bit."""
    ser = make(adk_water).run()
    fed_backend = NodeBackend(gpus=None, readers=2, cpu_workers=1, part_frames=3)
    fed = make(adk_water).run(backend=fed_backend)
    own = make(adk_water).run(backend=NodeBackend(gpus=None, readers=0, cpu_workers=1, part_frames=3))
    _assert_same_results(fed, own)
    _assert_same_results(fed, ser, exact_float=False)
    run = fed_backend.last_run
    assert len(run["readers"]) == 2 and all(r["pid"] for r in run["readers"])
    assert [w["frames"] for w in run["workers"]] == [len(adk_water.trajectory)]


@pytest.fixture(scope="module")
def walkers():
    """In memory: 300 atoms taking small random steps for 12 frames in a constant box."""
    rng = np.random.default_rng(11)
    start = rng.uniform(0.0, 30.0, size=(300, 3))
    coords = start + np.cumsum(rng.normal(scale=0.3, size=(12, 300, 3)), axis=0)
    return make_universe(coords, np.array([30.0, 30.0, 30.0, 90.0, 90.0, 90.0]))


@pytest.mark.parametrize("make", [
    pytest.param(lambda u: VanHove(u.atoms, lags=[0, 1, 3], nbins=30, range=(0.0, 8.0)),
                 id="VanHove"),
    pytest.param(lambda u: IntermediateScattering(u.atoms, q=[0.5, 1.0], lags=3, by="name"),
                 id="IntermediateScattering")])
def test_fed_time_correlations_equal_serial(walkers, make):
    """The time correlations' frames fed by readers (their halo's too): the results of the
    unfed run with the same parts bit for bit, and serial's."""
    assert make(walkers)._can_feed()
    ser = make(walkers).run()
    fed_backend = NodeBackend(gpus=None, readers=2, cpu_workers=1, part_frames=4)
    fed = make(walkers).run(backend=fed_backend)
    own = make(walkers).run(backend=NodeBackend(gpus=None, readers=0, cpu_workers=1,
                                                part_frames=4))
    _assert_same_results(fed, own)
    _assert_same_results(fed, ser, exact_float=False)
    assert len(fed_backend.last_run["readers"]) == 2


def _state(pid):
    """The state letter of process `pid` (R, S, Z, ...), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_readers_end_with_the_run(adk_water):
    """A cold run's readers are terminated as run() returns, not waited for: they are
    reaped without a thread (none left in a process that forks the next run's workers)
    by the next run, and none is left running or as a zombie after it."""
    import threading

    from mdakit_fastrdf.backends import processes

    ow = adk_water.select_atoms("name OW")
    backend = NodeBackend(gpus=None, readers=3, cpu_workers=1, part_frames=3)
    InterRDF(ow, ow).run(backend=backend)
    pids = [r["pid"] for r in backend.last_run["readers"]]
    assert len(pids) == 3
    assert not [t for t in threading.enumerate() if "reaper" in t.name]
    # terminated: each is exiting or has exited (a zombie until reaped), none still reads
    deadline = time.monotonic() + 10
    while any(_state(p) not in (None, "Z", "X") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_state(p) in (None, "Z", "X") for p in pids), [_state(p) for p in pids]
    # the next run reaps them (without blocking on one still exiting)
    InterRDF(ow, ow).run(backend=NodeBackend(gpus=None, readers=2, cpu_workers=1))
    for pid in pids:  # (a zombie still has its /proc entry)
        assert _state(pid) is None, (pid, _state(pid))
    processes.reap_ended()
    assert not [p for p, _ in processes._ended_unreaped if p.pid in pids]


@pytest.mark.parametrize("make", ANALYSES)
def test_fed_gpu_standin_equals_serial(adk_water, make):
    """The default plan beside a GPU: a GPU worker (stand-in) fed by readers."""
    ser = make(adk_water).run(step=2)
    backend = _standins()
    fed = make(adk_water).run(step=2, backend=backend)
    _assert_same_results(fed, ser, exact_float=False)
    run = backend.last_run
    if make(adk_water)._plan_device() == "cpu":  # InterRDF_s: no GPU kernel, CPU workers
        assert {w["kind"] for w in run["workers"]} == {"cpu"}
        return
    assert run["readers"], "the default plan beside a GPU has readers"
    assert [w["kind"] for w in run["workers"]] == ["gpu"]


def test_changing_box_and_blocks(npt_universe):
    """Each frame's box and volume travel with its rows: block results and volume_cum of a
    fed run equal those of the unfed run with the same parts bit for bit."""
    g = npt_universe.atoms
    kw = dict(nbins=30, range=(0.0, 9.0), exclusion_block=(1, 1))
    ser = InterRDF(g, g, **kw).run(blocks=4)
    own = InterRDF(g, g, **kw).run(blocks=4, backend=NodeBackend(gpus=None, readers=0, cpu_workers=1,
                                                                 part_frames=3))
    fed = InterRDF(g, g, **kw).run(blocks=4, backend=NodeBackend(gpus=None, readers=3, cpu_workers=1,
                                                                 part_frames=3))
    _assert_same_results(fed, own)
    np.testing.assert_array_equal(fed.results.count_uint64, ser.results.count_uint64)
    np.testing.assert_array_equal(fed.results.block_count_uint64, ser.results.block_count_uint64)
    np.testing.assert_allclose(fed.results.volume_cum, ser.results.volume_cum, rtol=1e-14)


def test_frame_selection(npt_universe):
    g = npt_universe.atoms
    kw = dict(nbins=30, range=(0.0, 9.0))
    ser = InterRDF(g, g, **kw).run(frames=[6, 1, 3, 3])
    fed = InterRDF(g, g, **kw).run(frames=[6, 1, 3, 3],
                                   backend=NodeBackend(gpus=None, readers=2, cpu_workers=1, part_frames=1))
    np.testing.assert_array_equal(fed.frames, [6, 1, 3, 3])
    np.testing.assert_array_equal(fed.results.count_uint64, ser.results.count_uint64)


def test_updating_groups_run_without_readers(adk_water):
    """An UpdatingAtomGroup's rows change each frame: its workers read their own frames."""
    shell = adk_water.select_atoms("name OW and around 6 protein", updating=True)
    ow = adk_water.select_atoms("name OW")
    kw = dict(nbins=30, range=(0.0, 8.0))
    ser = InterRDF(shell, ow, **kw).run(step=3)
    backend = _standins()
    par = InterRDF(shell, ow, **kw).run(step=3, backend=backend)
    assert backend.last_run["readers"] == []
    np.testing.assert_array_equal(par.results.count_uint64, ser.results.count_uint64)
    with pytest.raises(ValueError, match="cannot take its frames from readers"):
        InterRDF(shell, ow, **kw).run(step=3, backend=NodeBackend(gpus=None, readers=2, cpu_workers=1))


# -- failures -------------------------------------------------------------------------------------


def test_reader_error_names_the_frame():
    rng = np.random.default_rng(3)
    dims = np.array([20.0, 20.0, 20.0, 90.0, 90.0, 90.0])
    coords = np.stack([random_positions_in_box(rng, 50, dims)[0] for _ in range(6)])
    coords[4, 7] = np.nan
    u = make_universe(coords, np.tile(dims, (6, 1)))
    before = _ring_files()
    with pytest.raises(ValueError, match="frame 4 hold NaN") as info:
        InterRDF(u.atoms, u.atoms, nbins=10, range=(0.0, 8.0)).run(
            backend=NodeBackend(gpus=None, readers=2, cpu_workers=1))
    assert any("reader" in note for note in getattr(info.value, "__notes__", []))
    assert _ring_files() == before


class _DyingReaderRDF(InterRDF):
    """A reader process that ends without a word on frame 3."""

    def _read_frame(self, ts, out):
        if ts.frame == 3:
            os._exit(7)
        super()._read_frame(ts, out)


def test_dead_reader_stops_the_run(npt_universe):
    g = npt_universe.atoms
    before = _ring_files()
    with pytest.raises(WorkerDiedError, match="reader.*exited with code 7"):
        _DyingReaderRDF(g, g, nbins=10, range=(0.0, 8.0)).run(
            backend=NodeBackend(gpus=None, readers=1, cpu_workers=1))
    assert _ring_files() == before


def test_rings_are_removed(npt_universe):
    before = _ring_files()
    g = npt_universe.atoms
    InterRDF(g, g, nbins=10, range=(0.0, 8.0)).run(backend=NodeBackend(gpus=None, readers=2, cpu_workers=1))
    assert _ring_files() == before


def test_ring_round_trip(tmp_path):
    class TS:
        frame, time, volume = 12, 2.5, np.float64(1234.5)
        dimensions = np.array([10, 11, 12, 90, 80, 70], dtype=np.float32)

    ring = Ring.new(3, 5, str(tmp_path))
    other = Ring(*ring.spec())
    ring.rows(2)[:] = np.arange(15, dtype=np.float32).reshape(5, 3)
    ring.write_meta(2, 8, TS, kind=3)
    assert other.prepared_kind(2) == 3
    pos, ts = other.timestep(2)
    assert pos == 8 and ts.frame == 12 and ts.time == 2.5 and ts.volume == TS.volume
    np.testing.assert_array_equal(ts.dimensions, TS.dimensions)
    assert ts.dimensions.dtype == np.float32
    np.testing.assert_array_equal(other.rows(2), ring.rows(2))
    TS.dimensions = None
    ring.write_meta(0, 9, TS)
    assert other.timestep(0)[1].dimensions is None and other.prepared_kind(0) is None
    with pytest.raises(RuntimeError, match="no positions"):
        ts.positions  # noqa: B018
    ring.close(unlink=True)
    assert not os.path.exists(ring.path)


@requires_gpu
def test_fed_gpu_worker_equals_cpu(adk_water):
    """A real GPU worker fed by readers gives the CPU's serial counts."""
    ow = adk_water.select_atoms("name OW")
    kw = dict(nbins=75, range=(0.0, 15.0))
    ser = InterRDF(ow, ow, device="cpu", **kw).run()
    backend = NodeBackend(gpus=[0], readers=2)
    fed = InterRDF(ow, ow, device="cuda", **kw).run(backend=backend)
    np.testing.assert_array_equal(fed.results.count_uint64, ser.results.count_uint64)
    np.testing.assert_array_equal(fed.frames, ser.frames)
    run = backend.last_run
    assert [w["kind"] for w in run["workers"]] == ["gpu"] and len(run["readers"]) == 2
    assert run["workers"][0]["devices_used"] == ["cuda:0"]


@pytest.mark.parametrize("box", ["ortho-brute", "ortho-grid", "none-grid", "triclinic"])
def test_rows_prepared_by_readers(box):
    """InterRDF prepares its rows as MDAnalysis's capped_distance would (brute force with
    the scaled orthorhombic arithmetic, grid search with wrapped or shifted positions); a
    reader does it for the fed worker and passes the kernel's box on: the same counts."""
    rng = np.random.default_rng(11)
    n = 400 if box == "ortho-brute" else 3000
    dims = {"triclinic": [30.0, 31.0, 29.0, 70.0, 100.0, 110.0]}.get(box, [30.0, 31.0, 29.0,
                                                                          90.0, 90.0, 90.0])
    dims = np.array(dims)
    coords = np.stack([random_positions_in_box(rng, n, dims)[0] - 7.0 for _ in range(5)])
    u = make_universe(coords, None if box.startswith("none") else np.tile(dims, (5, 1)))
    rmax = 10.0 if box == "ortho-brute" else 7.0  # brute force: r_max > 0.3 of the box
    kw = dict(nbins=40, range=(0.0, rmax), norm="density" if box.startswith("none") else "rdf")
    # what a reader hands on: the rows prepared, and the box kind the kernel must use
    reader = InterRDF(u.atoms, u.atoms, **kw)
    rows = np.empty((reader._prepare_reader(), 3), dtype=np.float32)
    kind = reader._read_frame(u.trajectory[0], rows)
    assert kind == {"ortho-brute": ORTHO_SCALED, "ortho-grid": ORTHO, "none-grid": NO_BOX,
                    "triclinic": TRICLINIC}[box]
    ser = InterRDF(u.atoms, u.atoms, **kw).run()
    fed = InterRDF(u.atoms, u.atoms, **kw).run(
        backend=NodeBackend(gpus=None, readers=2, cpu_workers=1, part_frames=2))
    np.testing.assert_array_equal(fed.results.count_uint64, ser.results.count_uint64)
    assert fed.results.count_uint64.sum() > 0


def test_reader_prepares_only_for_the_base_accumulate(adk_water):
    ow = adk_water.select_atoms("name OW")[:50]
    assert InterRDF(ow, ow)._reader_prepares()
    assert not LateralRDF(ow, ow)._reader_prepares()  # flattens first: its worker prepares


def test_plan_workers_per_gpu():
    topo = NodeTopology.simple([16], n_gpus=1)
    specs = plan_workers(topo, workers_per_gpu=2)
    gpu = [s for s in specs if s.kind == "gpu"]
    assert [s.device for s in gpu] == ["cuda:0", "cuda:0"]
    assert [len(s.cpus) for s in gpu] == [2, 2] and not set(gpu[0].cpus) & set(gpu[1].cpus)
    assert [s.kind for s in specs].count("reader") == 12
    with pytest.raises(ValueError, match="workers_per_gpu"):
        plan_workers(topo, workers_per_gpu=0)


def test_warm_up_creates_the_engine_state_a_part_reuses(adk_water):
    """A fed GPU worker creates its engine state before the first frame; in a worker (a
    placement set) the engine of every part finds it again."""
    from mdakit_fastrdf import engine

    ow = adk_water.select_atoms("name OW")[:100]
    a = InterRDF(ow, ow, nbins=10, range=(0.0, 5.0), device="cpu")
    engine.set_worker_placement(engine.WorkerPlacement(device="cpu", n_threads=1, rank=0,
                                                       kind="gpu", bound_device="cuda:0"))
    try:
        engine.impl_cache.clear()
        a._warm_up()
        assert len(engine.impl_cache) == 1
        warm = next(iter(engine.impl_cache.values()))
        layout = a._layout()
        assert a._make_engine()._make_impl(layout.offsets, layout.pairs) is warm
    finally:
        engine.set_worker_placement(None)
        engine.impl_cache.clear()


class _RingsGoneRDF(InterRDF):
    """A reader that checks, on frame 6, that the run's ring files are gone (the parent
    removes them once every process has mapped them)."""

    def _read_frame(self, ts, out):
        if ts.frame == 6:
            import time

            pattern = f"mdakit-fastrdf-feed-{os.getppid()}-*"
            for _ in range(300):
                if not any(glob.glob(os.path.join(d, pattern))
                           for d in ("/dev/shm", tempfile.gettempdir())):
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError("the ring files are still there while the run goes on")
        return super()._read_frame(ts, out)


def test_ring_files_removed_once_mapped(npt_universe):
    g = npt_universe.atoms
    ser = InterRDF(g, g, nbins=10, range=(0.0, 8.0)).run()
    fed = _RingsGoneRDF(g, g, nbins=10, range=(0.0, 8.0)).run(
        backend=NodeBackend(gpus=None, readers=2, cpu_workers=1, part_frames=2))
    np.testing.assert_array_equal(fed.results.count_uint64, ser.results.count_uint64)


@pytest.mark.parametrize("refgroup", [False, True], ids=["box-centre", "refgroup"])
def test_cylindrical_rdf_beside_a_gpu_reads_its_own_frames(refgroup):
    """CylindricalRDF's first row is the frame's axis point (the box centre or refgroup's
    centre), which readers do not compute: beside a GPU its workers read their own frames
    and the counts equal serial's (a 2-GPU run found readers failing on it)."""
    from mdakit_fastrdf import CylindricalRDF

    rng = np.random.default_rng(11)
    dims = np.array([[30.0 + 0.5 * f, 31.0, 40.0, 90.0, 90.0, 90.0] for f in range(6)])
    u = make_universe(np.stack([random_positions_in_box(rng, 300, d)[0] for d in dims]),
                      dims, atoms_per_residue=3)
    kw = {"refgroup": u.atoms[:12]} if refgroup else {}

    def make():
        return CylindricalRDF(u.atoms, nbins=30, range=(0.0, 9.0), axis="z", **kw)

    assert not make()._can_feed()
    ser = make().run(step=2)
    backend = _standins()
    par = make().run(step=2, backend=backend)
    np.testing.assert_array_equal(par.results.count_uint64, ser.results.count_uint64)
    assert not backend.last_run["readers"]
    with pytest.raises(ValueError, match="readers=2: this analysis cannot take its frames"):
        make().run(backend=_standins(readers=2))
