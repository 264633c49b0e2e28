"""A warm engine: ``with NodeBackend(...) as node:`` keeps its workers and readers (and a GPU
worker's CUDA context) from one run to the next.

Every run gives serial's counts; the same processes serve consecutive runs of one plan,
also of different analyses (other rows per frame, other rings); a run of another plan, a
failed run or a worker busy with a cancelled copy at the end replace what they must; the
block's end ends every process and leaves no file behind. GPU workers are CPU stand-ins
here (tests/gpu/test_cuda.py and the benchmarks run real ones).
"""

import glob
import os
import time
import warnings

import numpy as np
import pytest
from stragglers import SlowWorkerLateHelperRDF

from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF
from mdakit_fastrdf.backends import NodeBackend
from mdakit_fastrdf.backends import node_run
from mdakit_fastrdf.backends.topology import NodeTopology, detect_topology
from mdakit_fastrdf.engine import worker_placement


def _standin(**kw):
    t = detect_topology()
    topo = NodeTopology(t.groups, n_gpus=1, source="test", gpu_source="stand-in")
    return NodeBackend(gpus=[0], topology=topo, _gpu_standin=True, **kw)


def _pids(run):
    # (a worker started for this run that was not yet ready when it ended has no pid)
    return sorted([w["pid"] for w in run["workers"] if w["pid"] is not None]
                  + [r["pid"] for r in run["readers"]])


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "Z" not in next(x for x in f if x.startswith("State:")).split()[1]
    except (OSError, IndexError):
        return False


def _files():
    return set(glob.glob("/dev/shm/mdakit-fastrdf-*") + glob.glob("/tmp/mdakit-fastrdf-*"))


def _rdf(u):
    ow = u.select_atoms("name OW")[:500]
    return InterRDF(ow, ow, nbins=60, range=(0.0, 12.0))


def _species(u):
    return SpeciesRDF(u.atoms[:700], by="name", nbins=50, range=(0.0, 10.0))


@pytest.fixture(scope="module")
def serial(adk_water):
    return {"rdf": _rdf(adk_water).run().results.count_uint64,
            "species": _species(adk_water).run().results.count_uint64}


@pytest.mark.parametrize("make", [lambda: NodeBackend(gpus=None, cpu_workers=2), _standin],
                         ids=["cpu-workers", "gpu-standin-and-readers"])
def test_same_processes_serve_every_run(adk_water, serial, make):
    before = _files()
    with make() as node:
        pids = []
        for _ in range(3):
            for name, analysis in (("rdf", _rdf), ("species", _species)):
                r = analysis(adk_water).run(backend=node)
                np.testing.assert_array_equal(r.results.count_uint64, serial[name])
                pids.append(_pids(node.last_run))
        # (on a loaded machine a process may not have said ready before a short first run
        # ended: it has no pid in that run's report, but it is the same process later)
        every = set().union(*map(set, pids))
        n_procs = len(node.last_run["workers"]) + len(node.last_run["readers"])
        assert len(every) == n_procs, pids
        assert all(_alive(p) for p in every)
        t_exit = time.perf_counter()
    # the readers are ended at once (they do not read their pipes while they wait)
    assert time.perf_counter() - t_exit < 1.5
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids[0]), "the block's end ends the processes"
    assert _files() <= before


def test_another_plan_replaces_the_processes(adk_water, serial):
    """InterRDF_s has no GPU kernel: its plan (CPU workers) differs from InterRDF's (a GPU
    worker and readers); the engine starts the processes each plan needs, and the counts
    stay serial's."""
    ow = adk_water.select_atoms("name OW")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        sites = InterRDF_s(adk_water, [[ow[:20], ow[20:40]]], nbins=40, range=(0.0, 10.0))
        site_ref = InterRDF_s(adk_water, [[ow[:20], ow[20:40]]], nbins=40,
                              range=(0.0, 10.0)).run().results.count
    with _standin() as node:
        r = _rdf(adk_water).run(backend=node)
        first = _pids(node.last_run)
        s = sites.run(backend=node)
        np.testing.assert_array_equal(s.results.count[0], site_ref[0])
        assert {w["kind"] for w in node.last_run["workers"]} == {"cpu"}
        r = _rdf(adk_water).run(backend=node)
        np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
        assert _pids(node.last_run) != first


class RaisingRDF(InterRDF):
    def _single_frame(self):
        if self._ts.frame == 3:
            raise ValueError("boom at frame 3")
        super()._single_frame()


def test_a_failed_run_leaves_a_working_engine(adk_water, serial):
    with NodeBackend(gpus=None, cpu_workers=2) as node:
        _rdf(adk_water).run(backend=node)
        ow = adk_water.select_atoms("name OW")[:500]
        with pytest.raises(ValueError, match="boom at frame 3"):
            RaisingRDF(ow, ow, nbins=60, range=(0.0, 12.0)).run(backend=node)
        r = _rdf(adk_water).run(backend=node)
        np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])


@pytest.mark.parametrize("settle_s, kept", [(0.0, False), (10.0, True)],
                         ids=["replaced", "kept"])
def test_a_worker_busy_with_a_cancelled_copy(adk_water, serial, monkeypatch, settle_s, kept):
    """The slow worker's part is recomputed by the other and the run ends at once, the
    slow worker still in its 1.5 s frame. It is told the run is over and kept; the next
    run waits up to SETTLE_S for it to stop its cancelled copy: with time enough it serves
    that run (no new process: a GPU worker's CUDA start saved), without it is replaced."""
    if sum(len(g.cpus) for g in detect_topology().groups) < 2:
        pytest.skip("needs two cores")
    monkeypatch.setattr(node_run, "SETTLE_S", settle_s)
    ow = adk_water.select_atoms("name OW")[:500]
    with NodeBackend(gpus=None, cpu_workers=2, part_frames=5) as node:
        t0 = time.perf_counter()
        r = SlowWorkerLateHelperRDF(ow, ow, nbins=60, range=(0.0, 12.0)).run(backend=node)
        assert time.perf_counter() - t0 < 6.0
        np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
        assert node.last_run["duplicates_won"] >= 1, node.last_run
        slow_pid = next(w["pid"] for w in node.last_run["workers"] if w["rank"] == 0)
        r = _rdf(adk_water).run(backend=node)
        np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
        # (the pool's process of rank 0, whether or not it said ready in this short run)
        assert (node._pool.procs[0].proc.pid == slow_pid) == kept
        assert all(_alive(p) for p in _pids(node.last_run))


def test_without_a_block_nothing_is_kept(adk_water):
    node = NodeBackend(gpus=None, cpu_workers=1)
    _rdf(adk_water).run(backend=node)
    first = _pids(node.last_run)
    _rdf(adk_water).run(backend=node)
    assert not set(first) & set(_pids(node.last_run))
    node.close()  # (nothing to close: harmless)
    assert os.getpid() not in first


class LateReaderRDF(InterRDF):
    """The last reader takes 1.5 s to unpickle its copy of the analysis: a reader still
    starting when a short run ends (seen with 28 readers on a 2-GPU node)."""

    def __setstate__(self, state):
        self.__dict__.update(state)
        p = worker_placement()
        if p is not None and p.kind == "reader" and p.rank == 2:
            time.sleep(1.5)


def test_a_reader_starting_after_its_run_ended_serves_the_next(adk_water, serial):
    """The late reader finds its run's files gone, waits for the next run and serves it:
    it is not lost (the same processes in every run) and no run fails."""
    ow = adk_water.select_atoms("name OW")[:500]
    with _standin(readers=2) as node:
        pids = []
        for k in range(4):
            r = LateReaderRDF(ow, ow, nbins=60, range=(0.0, 12.0)).run(backend=node)
            np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
            pids.append(_pids(node.last_run))
            time.sleep(2.0 if k == 1 else 0.0)  # (later runs find it waiting)
        assert all(p == pids[0] for p in pids), pids


def _ring_maps(pid):
    """The feed rings (files named mdakit-fastrdf-feed-*) process `pid` still maps."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return {line.split()[-2] if line.rstrip().endswith("(deleted)") else line.split()[-1]
                    for line in f if "mdakit-fastrdf-feed-" in line}
    except OSError:
        return set()


def test_runs_reuse_their_rings_and_unmap_the_replaced_ones(adk_water, serial):
    """A warm engine's next run of the same rows per frame writes into the same rings
    (its processes kept their mappings: nothing of ~1 GB for 1M atoms is freed, created or
    faulted in again); an analysis of other rows gets new rings and every process unmaps
    the old ones; the parent maps none, and no forked process keeps its parent's."""
    def mapped(pids):
        return {p: _ring_maps(p) for p in pids}

    with _standin() as node:
        r = _rdf(adk_water).run(backend=node)
        np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
        pids = _pids(node.last_run)
        assert node.last_run["readers"], "the stand-in plan has readers"
        # every process that said ready maps the ring (on a node of many cores a reader
        # may still be starting when a short run ends: it maps the next run's)
        ready = [w["pid"] for w in node.last_run["workers"]] + [
            r["pid"] for r in node.last_run["readers"] if r["mapped"]]
        assert len(ready) >= 2
        first = mapped(ready)
        rings = set().union(*first.values())
        assert len(rings) == 1 and all(m == rings for m in first.values()), first
        first = mapped(pids)
        assert not _ring_maps(os.getpid())
        # (a run reuses the rings when the last run kept them: every process mapped them,
        # none is busy; on a loaded machine or one of many cores a reader may not have
        # said ready before a short run ended)
        reused = 0
        for _ in range(6):
            complete = _pids(node.last_run) == pids and node.last_run["rings_kept"]
            r = _rdf(adk_water).run(backend=node)
            np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
            if complete and _pids(node.last_run) == pids:
                assert mapped(pids) == first
                reused += 1
            first = mapped(pids)
            rings = set().union(*first.values())
        assert reused, "no run reused the rings"
        s = _species(adk_water).run(backend=node)  # other rows per frame: other rings
        np.testing.assert_array_equal(s.results.count_uint64, serial["species"])
        # every process that took part (on a node of many cores a reader may still be
        # starting when the short run ends: it unmaps the old rings at its next run)
        took_part = [w["pid"] for w in node.last_run["workers"]] + [
            r["pid"] for r in node.last_run["readers"] if r["mapped"]]
        now = mapped(took_part)
        assert len(now) >= 2
        assert all(m and not (m & rings) for m in now.values()), (first, now)
        r = _rdf(adk_water).run(backend=node)
        np.testing.assert_array_equal(r.results.count_uint64, serial["rdf"])
        assert not _ring_maps(os.getpid())
