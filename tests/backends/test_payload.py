"""The analysis a node run sends its processes, its Universes apart (backends/payload.py).

A warm engine's processes keep the Universes they unpickled and unpickle only a Universe
whose pickled bytes they have not seen; an analysis's reader is its kept Universe's
reader; a Universe changed between runs is sent again, and the results stay serial's.
"""

import glob
import json
import os

import MDAnalysis as mda
import numpy as np
import pytest
from MDAnalysis.transformations.boxdimensions import set_dimensions

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.backends import NodeBackend, payload
from mdakit_fastrdf.backends.topology import NodeTopology, detect_topology


@pytest.fixture
def empty_keep(monkeypatch):
    monkeypatch.setattr(payload, "_kept", type(payload._kept)())


def _rdf(u):
    ow = u.select_atoms("name OW")[:400]
    return InterRDF(ow, ow, nbins=40, range=(0.0, 10.0))


def test_a_kept_universe_is_reused_with_its_reader(adk_water, empty_keep):
    r = _rdf(adk_water)
    blob = payload.dumps(r, r)
    a = payload.loads(blob)
    assert payload.last_load == {"kept": 0, "unpickled": 1}
    b = payload.loads(blob)
    assert payload.last_load["unpickled"] == 0 and payload.last_load["kept"] >= 1
    assert a is not b
    assert a.g1.universe is b.g1.universe  # the kept one
    # the analysis reads frames with the Universe's own reader, never a copy of it
    assert b._trajectory is b.g1.universe.trajectory
    assert b.g2.universe is b.g1.universe
    # and it computes what the original does
    np.testing.assert_array_equal(b.run(stop=3).results.count_uint64,
                                  _rdf(adk_water).run(stop=3).results.count_uint64)


def test_a_changed_universe_is_unpickled_again(adk_water, empty_keep):
    r = _rdf(adk_water)
    first = payload.loads(payload.dumps(r, r))
    adk_water.trajectory[3]  # another frame: other bytes, another Universe
    try:
        second = payload.loads(payload.dumps(r, r))
    finally:
        adk_water.trajectory[0]
    assert payload.last_load["unpickled"] == 1
    assert second.g1.universe is not first.g1.universe
    assert second.g1.universe.trajectory.frame == 3


def test_a_reader_without_its_universe_is_pickled_whole(adk_water, empty_keep):
    # (a reader met before its Universe is known: an ordinary pickle, which is correct)
    obj = {"reader": adk_water.trajectory, "group": adk_water.atoms[:10]}
    blobs, _body = payload._split(payload.dumps(obj))
    assert blobs == {}
    out = payload.loads(payload.dumps(obj))
    assert out["reader"] is out["group"].universe.trajectory


def _standin(**kw):
    t = detect_topology()
    topo = NodeTopology(t.groups, n_gpus=1, source="test", gpu_source="stand-in")
    return NodeBackend(gpus=[0], topology=topo, _gpu_standin=True, readers=2, **kw)


def _unpickled_by_run(directory):
    """The 'unpickled' events of the processes, per run (by the run's number, `gen`: a
    reader still starting when a short run ended loads that run's analysis late, during
    the next run, and then the next run's)."""
    events = []
    for path in glob.glob(os.path.join(directory, "trace-*.jsonl")):
        with open(path) as f:
            events += list(map(json.loads, f))
    events = [e for e in events if e["event"] == "unpickled"]
    gens = sorted({e["gen"] for e in events})
    return [[e for e in events if e["gen"] == g] for g in gens]


def test_warm_runs_keep_the_universe(adk_water, tmp_path, monkeypatch):
    u = mda.Universe(adk_water.filename, adk_water.trajectory.filename)
    serial = _rdf(u).run(stop=6).results.count_uint64
    monkeypatch.setenv("MDAKIT_FASTRDF_TRACE", str(tmp_path))
    with _standin() as node:
        for _ in range(2):
            np.testing.assert_array_equal(
                _rdf(u).run(backend=node, stop=6).results.count_uint64, serial)
        # a Universe changed between runs (another box): sent again, serial's counts
        u.trajectory.add_transformations(set_dimensions([45.0, 45.0, 45.0, 90.0, 90.0, 90.0]))
        monkeypatch.delenv("MDAKIT_FASTRDF_TRACE")
        changed = _rdf(u).run(stop=6).results.count_uint64
        assert not np.array_equal(changed, serial)
        monkeypatch.setenv("MDAKIT_FASTRDF_TRACE", str(tmp_path))
        np.testing.assert_array_equal(_rdf(u).run(backend=node, stop=6).results.count_uint64,
                                      changed)
    first, second, third = _unpickled_by_run(tmp_path)
    n = len(node.last_run["workers"]) + len(node.last_run["readers"])
    # The GPU worker loads every run's analysis; a reader may still be starting when a
    # short run ends (or get no reading in it), and then loads a later run's. So: each
    # process's first load unpickles the Universe; a later load of the unchanged
    # Universe (the second run) keeps it; the changed one (the third run) is unpickled.
    assert all(any(e["role"] == "gpu" for e in run) for run in (first, second, third))
    assert all(len(run) <= n for run in (first, second, third))
    seen = set()
    for k, run in enumerate((first, second, third)):
        for e in sorted(run, key=lambda e: e["t"]):
            new = e["pid"] not in seen
            seen.add(e["pid"])
            if new or k == 2:
                assert e["unpickled"] == 1 and e["kept"] == 0, (k, e)
            else:
                assert e["unpickled"] == 0 and e["kept"] == 1, (k, e)
    assert len(seen) == n


def test_an_unchanged_universe_is_named_without_hashing_it_again(adk_water, empty_keep,
                                                                 monkeypatch):
    """The parent names a Universe whose pickle equals its last one by that last name (a
    comparison of the bytes, no hash); a changed Universe is hashed and named anew."""
    monkeypatch.setattr(payload, "_named", type(payload._named)())
    hashed = []
    real = payload.hashlib.sha256

    def counting(data):
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(payload.hashlib, "sha256", counting)
    r = _rdf(adk_water)
    first = payload.dumps(r, r)
    assert len(hashed) == 1
    again = payload.dumps(_rdf(adk_water), r)
    assert len(hashed) == 1 and again == first
    adk_water.trajectory[2]  # another frame: other bytes, another name
    try:
        moved = payload.dumps(r, r)
    finally:
        adk_water.trajectory[0]
    assert len(hashed) == 2 and moved != first
    assert payload._split(moved)[0].keys() != payload._split(first)[0].keys()


def test_a_payload_file_is_mapped_and_loads_as_its_bytes(adk_water, empty_keep, tmp_path):
    """A warm run's file: the payload's pieces written unjoined, mapped by the process
    (payload.read); loading it gives what loading the bytes gives, and the mapping closes
    once loaded (no view of it is left)."""
    r = _rdf(adk_water)
    p = payload.dump(r, r)
    assert len(p.parts) > 1 and len(p) == len(p.joined()) and p.joined() == payload.dumps(r, r)
    path = tmp_path / "run"
    p.write(str(path))
    assert path.read_bytes() == p.joined()
    m = payload.read(str(path))
    a = payload.loads(m)
    assert payload.last_load == {"kept": 0, "unpickled": 1}
    m.close()  # (raises BufferError while a view of the mapping is alive)
    b = payload.loads(payload.read(str(path)))
    assert payload.last_load == {"kept": 1, "unpickled": 0}
    assert b.g1.universe is a.g1.universe
    np.testing.assert_array_equal(b.run(stop=2).results.count_uint64,
                                  _rdf(adk_water).run(stop=2).results.count_uint64)
