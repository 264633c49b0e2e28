"""Parallel backends over frames (MDAnalysis' split-apply-combine) give the serial result.

The integer counts are summed across workers, so every backend must return *identical*
``count_uint64`` (not merely close), the same ``volume_cum`` and the same rdf.
"""

import numpy as np
import pytest

from conftest import datafile, make_universe, random_positions_in_box

from mdakit_fastrdf import InterRDF


@pytest.fixture(scope="module")
def adk_ow(adk_water):
    return adk_water.select_atoms("name OW")[:1000]


@pytest.fixture(scope="module")
def mem_universe():
    """A small in-memory universe (MemoryReader pickles with its data): 6 frames,
    triclinic box changing per frame, residues of 3 atoms."""
    rng = np.random.default_rng(17)
    n_frames, n = 6, 300
    dims = np.array([[24.0 + 0.3 * f, 25.0, 26.0, 80.0, 95.0, 105.0] for f in range(n_frames)])
    coords = np.stack([random_positions_in_box(rng, n, dims[f])[0] for f in range(n_frames)])
    return make_universe(coords, dims, atoms_per_residue=3, residues_per_segment=20)


def _assert_same_results(par, ser):
    np.testing.assert_array_equal(par.results.count_uint64, ser.results.count_uint64)
    np.testing.assert_array_equal(par.results.count, ser.results.count)
    # edges/bins are aggregated with ResultsGroup.ndarray_mean, as in MDAnalysis; the mean
    # of n_parts equal arrays may differ from them in the last bit when n_parts is not a
    # power of two, so allow one ulp there.
    np.testing.assert_allclose(par.results.edges, ser.results.edges, rtol=4e-16, atol=0)
    np.testing.assert_allclose(par.results.bins, ser.results.bins, rtol=4e-16, atol=0)
    if "volume_cum" in ser.results:
        np.testing.assert_allclose(par.results.volume_cum, ser.results.volume_cum, rtol=1e-12)
    np.testing.assert_allclose(par.results.rdf, ser.results.rdf, rtol=1e-12)
    assert par.n_frames == ser.n_frames


@pytest.mark.parametrize("precision", ["single", "double"])
def test_multiprocessing_equals_serial(adk_ow, precision):
    """backend='multiprocessing' with 2 workers: identical counts to serial (TPR/XTC, 1000
    OW, 4 frames)."""
    ser = InterRDF(adk_ow, adk_ow, precision=precision).run(stop=4)
    par = InterRDF(adk_ow, adk_ow, precision=precision).run(
        stop=4, backend="multiprocessing", n_workers=2)
    _assert_same_results(par, ser)


def test_dask_equals_serial(adk_ow):
    """backend='dask' with 2 workers: identical counts to serial."""
    pytest.importorskip("dask")
    ser = InterRDF(adk_ow, adk_ow, exclusion_block=(1, 1)).run(stop=4)
    par = InterRDF(adk_ow, adk_ow, exclusion_block=(1, 1)).run(
        stop=4, backend="dask", n_workers=2)
    _assert_same_results(par, ser)


@pytest.mark.parametrize(
    "kw",
    [dict(exclude_same="residue"), dict(exclusion_block=(3, 3), norm="density"),
     dict(norm="none", range=(1.0, 14.0), nbins=33)],
    ids=["exclude_same", "exclusion_block", "norm-none"],
)
def test_multiprocessing_in_memory_with_exclusions(mem_universe, kw):
    """Exclusions, other norms and more parts than workers (n_parts=3) on an in-memory
    trajectory whose box changes per frame."""
    g = mem_universe.atoms
    ser = InterRDF(g, g, precision="double", **kw).run()
    par = InterRDF(g, g, precision="double", **kw).run(
        backend="multiprocessing", n_workers=2, n_parts=3)
    _assert_same_results(par, ser)


def test_multiprocessing_frame_selection(mem_universe):
    """start/stop/step with a parallel backend selects the same frames as serial."""
    g1, g2 = mem_universe.atoms[:150], mem_universe.atoms[150:]
    ser = InterRDF(g1, g2).run(start=1, step=2)
    par = InterRDF(g1, g2).run(start=1, step=2, backend="multiprocessing", n_workers=2)
    assert ser.n_frames == 3
    _assert_same_results(par, ser)


def test_parallel_results_match_mdanalysis_parallel(mem_universe):
    """The parallel double-precision result also equals MDAnalysis' own InterRDF run with
    the same parallel backend."""
    from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

    g = mem_universe.atoms
    ref = MDAInterRDF(g, g, range=(0.0, 10.0)).run(backend="multiprocessing", n_workers=2)
    new = InterRDF(g, g, range=(0.0, 10.0), precision="double").run(
        backend="multiprocessing", n_workers=2)
    np.testing.assert_array_equal(new.results.count, ref.results.count)
    np.testing.assert_allclose(new.results.rdf, ref.results.rdf, rtol=1e-12)


def test_unknown_parallel_backend(mem_universe):
    """An unknown run() backend is rejected (MDAnalysis' check)."""
    g = mem_universe.atoms
    with pytest.raises(ValueError):
        InterRDF(g, g).run(backend="banana", n_workers=2)


@pytest.mark.slow  # a script in a new interpreter
def test_multiprocessing_after_threaded_serial_run(tmp_path):
    """A script that runs on several CPU threads and then forks workers (MDAnalysis's
    'multiprocessing' backend) must not hang: the thread pool is fork-aware. (GCC's OpenMP
    runtime, used before, hung here.) Run in a child process with a time limit."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import numpy as np
        import MDAnalysis as mda
        from MDAnalysisTests.datafiles import TPR, XTC
        from mdakit_fastrdf import InterRDF
        ow = mda.Universe(TPR, XTC).select_atoms("name OW")[:1500]
        ser = InterRDF(ow, ow, n_threads=4).run(stop=3)
        par = InterRDF(ow, ow, n_threads=4).run(stop=3, backend="multiprocessing", n_workers=2)
        assert np.array_equal(ser.results.count_uint64, par.results.count_uint64)
        print("OK")
    """)
    datafile("TPR", "XTC")  # skips when the data files are missing
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stderr[-2000:]


def test_serial_with_several_parts_counts_every_frame(adk_water):
    """MDAnalysis's serial backend aggregates one object n_parts times (its own InterRDF
    loses frames with n_parts > 1); ours must count every frame once, as one part does."""
    from mdakit_fastrdf import InterRDF, SpeciesRDF

    u = adk_water
    w = u.select_atoms("name OW")[:300]
    one = InterRDF(w, w, exclusion_block=(1, 1)).run(stop=5)
    for n_parts in (2, 3):
        r = InterRDF(w, w, exclusion_block=(1, 1)).run(stop=5, n_parts=n_parts)
        np.testing.assert_array_equal(r.results.count, one.results.count)
        assert r.n_frames == 5
    ag = u.select_atoms("resid 1-3 or name OW")[:400]
    s1 = SpeciesRDF(ag, by="element").run(stop=4)
    s3 = SpeciesRDF(ag, by="element").run(stop=4, n_parts=3)
    np.testing.assert_array_equal(s3.results.count, s1.results.count)


def _count_frame_reads(u):
    """Wrap the reader's _read_frame to record the frames it reads."""
    reads = []
    traj = u.trajectory
    orig = traj._read_frame

    def counting(i):
        reads.append(int(i))
        return orig(i)

    traj._read_frame = counting
    return reads


def test_worker_part_reads_each_frame_once(fresh_adk_water):
    """In a worker process a part reads its frames and nothing else (MDAnalysis's iterator
    reads frame 0 again at its end, one wasted read per part); in the calling process the
    trajectory still ends on its first frame, as after any MDAnalysis analysis. Same counts
    either way."""
    import os

    u = fresh_adk_water  # its own: its reader is wrapped below
    w = u.select_atoms("name OW")[:200]
    ser = InterRDF(w, w).run(start=2, stop=7)
    assert u.trajectory.frame == 0

    part = np.array([[0, 3], [1, 4], [2, 5]])
    r = InterRDF(w, w)
    r._run_pid = os.getpid()
    r._setup_frames(u.trajectory)
    r._prepare()
    reads = _count_frame_reads(u)
    r._run_pid = os.getpid() + 1  # as seen from a worker process
    r._compute(part)
    assert reads == [3, 4, 5]
    assert u.trajectory.frame == 5

    r2 = InterRDF(w, w)
    r2._run_pid = os.getpid()
    r2._setup_frames(u.trajectory)
    r2._prepare()
    reads.clear()
    r2._compute(part)  # in the calling process: MDAnalysis's iteration, rewind included
    assert reads[:3] == [3, 4, 5] and u.trajectory.frame == 0
    np.testing.assert_array_equal(r.results.count_uint64, r2.results.count_uint64)
    # and the worker-style part equals frames 3-5 of a serial run
    np.testing.assert_array_equal(r.results.count_uint64,
                                  InterRDF(w, w).run(start=3, stop=6).results.count_uint64)
    assert ser.n_frames == 5
