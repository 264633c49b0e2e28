"""mdakit_fastrdf.InterRDF_s against MDAnalysis.analysis.rdf.InterRDF_s.

Double precision counts must equal MDAnalysis's exactly (same site-site arrays, same
binning rule, which is not numpy.histogram's); the reference is always MDAnalysis itself.
"""

import re
import tracemalloc
import warnings

import numpy as np
import pytest
from MDAnalysis.analysis import rdf as mda_rdf

from conftest import load_universe, make_universe, random_positions_in_box

from mdakit_fastrdf import InterRDF_s
from mdakit_fastrdf.analysis import base as _base
from mdakit_fastrdf.analysis import rdf_s as rdf_s_module
from mdakit_fastrdf.backends.topology import CpuGroup, NodeTopology
from mdakit_fastrdf.backends import NodeBackend


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def memprot():
    """MDAnalysis's own InterRDF_s example (docstring and tests): GRO_MEMPROT/XTC_MEMPROT."""
    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    s1 = u.select_atoms("name ZND and resid 289")
    s2 = u.select_atoms("(name OD1 or name OD2) and resid 51 and sphzone 5.0 (resid 289)")
    s3 = u.select_atoms("name ZND and (resid 291 or resid 292)")
    s4 = u.select_atoms("(name OD1 or name OD2) and sphzone 5.0 (resid 291)")
    return u, [[s1, s2], [s3, s4]]


def _compare(ours, ref, rtol=1e-13):
    assert len(ours.results.count) == len(ref.results.count)
    for c, rc in zip(ours.results.count, ref.results.count):
        assert c.dtype == np.float64 and c.shape == rc.shape
        np.testing.assert_array_equal(c, rc)
    for g, rg in zip(ours.results.rdf, ref.results.rdf):
        np.testing.assert_allclose(g, rg, rtol=rtol, atol=0)
    np.testing.assert_array_equal(ours.results.edges, ref.results.edges)
    np.testing.assert_array_equal(ours.results.bins, ref.results.bins)
    for (a, b), (ra, rb) in zip(ours.results.indices, ref.results.indices):
        np.testing.assert_array_equal(a, ra)
        np.testing.assert_array_equal(b, rb)


@pytest.mark.parametrize("norm", ["rdf", "density", "none"])
def test_memprot_example_equals_mdanalysis(memprot, norm):
    u, ags = memprot
    ref = _quiet(mda_rdf.InterRDF_s, u, ags, norm=norm).run()
    ours = _quiet(InterRDF_s, u, ags, norm=norm, precision="double").run()
    _compare(ours, ref)
    assert sum(c.sum() for c in ref.results.count) > 0
    if norm == "rdf":
        assert ours.results.volume_cum == pytest.approx(ref.results.volume_cum, rel=1e-12)
    for c, rc in zip(ours.get_cdf(), ref.get_cdf()):
        np.testing.assert_array_equal(c, rc)
    assert ours.results.cdf is not None


def test_adk_triclinic_many_sites_and_rmin(adk_water):
    """Triclinic box, groups of 10-300 atoms (grid and brute-force paths of MDAnalysis),
    rmin > 0 (MDAnalysis truncates toward zero: a pair just below rmin lands in bin 0)."""
    u = adk_water
    ow = u.select_atoms("name OW")
    ags = [[u.select_atoms("name NZ"), ow[:300]],
           [u.select_atoms("resname NA+"), ow[:50]],
           [ow[:40], ow[:40]]]
    for rng_ in [(0.0, 15.0), (2.5, 9.0)]:
        ref = _quiet(mda_rdf.InterRDF_s, u, ags, nbins=60, range=rng_).run(stop=3)
        ours = _quiet(InterRDF_s, u, ags, nbins=60, range=rng_, precision="double").run(stop=3)
        _compare(ours, ref)


@pytest.mark.parametrize("dims", [None, [30.0, 31.0, 32.0, 90.0, 90.0, 90.0],
                                  [30.0, 31.0, 32.0, 70.0, 80.0, 100.0]])
def test_random_boxes_equal_mdanalysis(dims):
    rng = np.random.default_rng(5)
    if dims is None:
        coords = rng.uniform(-20, 20, size=(3, 200, 3)).astype(np.float32)
        norm = "density"
    else:
        coords = np.stack([random_positions_in_box(rng, 200, dims)[0] for _ in range(3)])
        norm = "rdf"
    u = make_universe(coords, dims)
    ags = [[u.atoms[:5], u.atoms[50:200]], [u.atoms[:120], u.atoms[60:180]]]
    for rmax in (6.0, 12.0):  # 12 > 0.3 L: MDAnalysis's brute force with a box
        ref = _quiet(mda_rdf.InterRDF_s, u, ags, nbins=40, range=(0.0, rmax), norm=norm).run()
        ours = _quiet(InterRDF_s, u, ags, nbins=40, range=(0.0, rmax), norm=norm,
                      precision="double").run()
        _compare(ours, ref)


def test_single_precision_close(memprot):
    u, ags = memprot
    ref = _quiet(mda_rdf.InterRDF_s, u, ags).run()
    ours = _quiet(InterRDF_s, u, ags).run()
    for c, rc in zip(ours.results.count, ref.results.count):
        assert c.shape == rc.shape
        # float32 distances can only move a pair to a neighbouring bin
        assert np.abs(c - rc).sum() <= 2 * max(1, int(0.001 * rc.sum()))
        np.testing.assert_array_equal(c.sum(axis=2), rc.sum(axis=2))


def test_deprecations_and_density(memprot):
    u, ags = memprot
    with pytest.warns(DeprecationWarning, match="superflous"):
        InterRDF_s(u, ags)
    with pytest.warns(DeprecationWarning, match="norm=density"):
        r = InterRDF_s(u, ags, density=True)
    assert r.norm == "density"
    ref = _quiet(mda_rdf.InterRDF_s, u, ags, norm="rdf", density=True)
    assert ref.norm == r.norm
    r = _quiet(InterRDF_s, u, ags).run(stop=2)
    r.get_cdf()
    for name in ("edges", "count", "bins", "rdf", "cdf"):
        with pytest.warns(DeprecationWarning, match=f"`{name}` attribute"):
            getattr(r, name)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(ags="no"), (TypeError, ValueError), "ags"),
    (dict(ags=[]), ValueError, "at least one"),
    (dict(ags=[[1, 2]]), TypeError, r"ags\[0\]\[0\]"),
    (dict(norm="foo"), ValueError, "invalid norm"),
    (dict(nbins=0), ValueError, "nbins"),
    (dict(range=(5, 1)), ValueError, "range"),
    (dict(precision="half"), ValueError, "precision"),
])
def test_bad_input(memprot, kw, exc, match):
    u, ags = memprot
    args = dict(ags=ags)
    args.update(kw)
    with pytest.raises(exc, match=match):
        _quiet(InterRDF_s, u, **args)


def _gib(nbytes):
    return re.escape(f"{nbytes / 2**30:.2f} GiB")


def test_memory_error_names_the_figure(memprot, monkeypatch):
    """The figure is the peak of the histograms, computed here from the sizes alone.

    Serial: the counts and results.rdf (two sets; results.cdf a third). Parallel with W
    workers and P parts: every worker's set and the pickled copy it sends back (2 W), every
    part the caller receives and the pickled copy of the one it is receiving (P + 1), and
    one accumulator for summing them in place (1): (P + W + 2) sets. The error comes before
    anything is allocated and names the figure, the available memory and the parameters."""
    u, ags = memprot
    n1, n2, nbins = 20000, 20000, 1000
    one_set = n1 * n2 * nbins * 8  # n1 * n2 site pairs, nbins float64 counters each
    r = _quiet(InterRDF_s, u, [[u.atoms[:n1], u.atoms[:n2]]], nbins=nbins)
    assert r.memory_bytes() == 2 * one_set
    assert r.memory_bytes(cdf=True) == 3 * one_set
    assert r.memory_bytes(2) == (2 + 2 + 2) * one_set  # 2 workers, 2 parts
    assert r.memory_bytes(2, n_parts=8) == (8 + 2 + 2) * one_set
    # blocks: 3 sets per process; after the run the counts, block counts and rdf
    # (B + 2), the rdf of every block and their stack (2 B), block_sem's temporaries (B + 2)
    assert r.memory_bytes(blocks=3) == (3 + 2 + 2 * 3 + 3 + 2) * one_set
    monkeypatch.setattr(rdf_s_module, "available_memory_bytes", lambda: 2**30)

    def raises(**kw):
        tracemalloc.start()
        try:
            with pytest.raises(MemoryError) as info:
                r.run(**kw)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2**20, f"{peak} bytes were allocated before the MemoryError"
        assert "count" not in r.results
        msg = str(info.value)
        assert re.search(r"\(20000, 20000, 1000\).*nbins=1000.*site groups \(ags\)", msg)
        assert "1.00 GiB are available" in msg
        return msg

    msg = raises()
    assert re.match(_gib(2 * one_set), msg.split("needs ")[1])
    msg = raises(backend="multiprocessing", n_workers=2)
    assert re.match(_gib((2 + 2 + 2) * one_set), msg.split("needs ")[1])
    assert "n_workers=2" in msg and "n_parts=2" in msg
    assert f"serially ({2 * one_set / 2**30:.2f} GiB)" in msg
    # a backend object: the workers of its plan (3 CPU workers on a 4-core node) and its
    # parts (part_frames=1: one per frame, 5 frames), not one process
    topo = NodeTopology((CpuGroup("node0", (0, 1, 2, 3), ((0,), (1,), (2,), (3,))),))
    node = NodeBackend(cpu_workers=3, part_frames=1, topology=topo)
    n_frames = u.trajectory.n_frames
    msg = raises(backend=node)
    assert re.match(_gib((n_frames + 3 + 2) * one_set), msg.split("needs ")[1])
    assert "n_workers=3" in msg and f"n_parts={n_frames}" in msg


def test_memory_figure_sums_all_pairs_of_groups(memprot):
    u, _ = memprot
    ags = [[u.atoms[:300], u.atoms[:200]], [u.atoms[:7], u.atoms[:11]]]
    r = _quiet(InterRDF_s, u, ags, nbins=50)
    one_set = (300 * 200 + 7 * 11) * 50 * 8
    assert r.memory_bytes() == 2 * one_set
    assert r.memory_bytes(4, n_parts=4) == (4 + 4 + 2) * one_set


def test_parts_summed_in_place():
    """The parts are added into one accumulator: the caller needs one more set, not one per
    part (np.sum over the stacked parts makes them all again); the sum is exact."""
    rng = np.random.default_rng(1)
    parts = [[rng.integers(0, 5, (50, 40, 100)).astype(np.float64),
              rng.integers(0, 5, (3, 4, 100)).astype(np.float64)] for _ in range(6)]
    one_set = sum(a.nbytes for a in parts[0])
    tracemalloc.start()
    try:
        total = _base.sum_parts(parts)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.1 * one_set
    for k in range(2):
        np.testing.assert_array_equal(total[k], np.sum([p[k] for p in parts], axis=0))
    assert _base.sum_parts(parts[:1])[0] is parts[0][0]  # one part: no copy


def test_get_cdf_checks_its_memory(memprot, monkeypatch):
    u, ags = memprot
    r = _quiet(InterRDF_s, u, ags, precision="double").run()
    monkeypatch.setattr(rdf_s_module, "available_memory_bytes", lambda: 8)
    with pytest.raises(MemoryError, match=r"GiB.*results\.cdf.*nbins=75"):
        r.get_cdf()
    assert "cdf" not in r.results


def test_parallel_backends_identical(memprot):
    u, ags = memprot
    ser = _quiet(InterRDF_s, u, ags, precision="double").run()
    assert InterRDF_s.get_supported_backends() == ("serial", "multiprocessing", "dask", "node")
    backends = ["multiprocessing"]
    try:
        import dask  # noqa: F401
        backends.append("dask")
    except ImportError:  # pragma: no cover
        pass
    for backend in backends:
        par = _quiet(InterRDF_s, u, ags, precision="double").run(backend=backend, n_workers=2)
        for c, rc in zip(par.results.count, ser.results.count):
            np.testing.assert_array_equal(c, rc)
        for g, rg in zip(par.results.rdf, ser.results.rdf):
            np.testing.assert_allclose(g, rg, rtol=1e-12)
        assert par.n_frames == ser.n_frames


@pytest.mark.parametrize("backend", ["multiprocessing", "node"])
def test_parallel_blocks_identical(memprot, backend):
    """Block counts come back from the workers and are summed in place like the counts."""
    u, ags = memprot
    ser = _quiet(InterRDF_s, u, ags, precision="double").run(blocks=2)
    par = _quiet(InterRDF_s, u, ags, precision="double").run(blocks=2, backend=backend,
                                                              n_workers=2)
    for k in range(len(ags)):
        np.testing.assert_array_equal(par.results.count[k], ser.results.count[k])
        np.testing.assert_array_equal(par.results.block_count[k], ser.results.block_count[k])
        np.testing.assert_allclose(par.results.block_rdf[k], ser.results.block_rdf[k],
                                   rtol=1e-12)
        np.testing.assert_allclose(par.results.rdf_sem[k], ser.results.rdf_sem[k],
                                   rtol=1e-12)
