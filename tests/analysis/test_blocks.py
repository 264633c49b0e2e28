"""Block averaging (``run(blocks=N)``) against an independent computation: MDAnalysis's own
InterRDF run separately on each block of frames, and NumPy for the mean and standard error."""

import warnings

import numpy as np
import pytest
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF
from MDAnalysis.analysis.rdf import InterRDF_s as MDAInterRDF_s

from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF

N_BLOCKS = 3


def block_frames(n_frames, n_blocks):
    return np.array_split(np.arange(n_frames), n_blocks)


@pytest.fixture(scope="module")
def water(adk_water):
    return adk_water.select_atoms("name OW")[:600]


@pytest.fixture(scope="module")
def blocked(water):
    return InterRDF(water, water, nbins=40, range=(0.0, 8.0), exclusion_block=(1, 1),
                    precision="double").run(blocks=N_BLOCKS)


def test_blocks_equal_mdanalysis_on_each_block(water, blocked):
    res = blocked.results
    n_frames = blocked.n_frames
    refs = []
    for frames in block_frames(n_frames, N_BLOCKS):
        ref = MDAInterRDF(water, water, nbins=40, range=(0.0, 8.0), exclusion_block=(1, 1))
        ref.run(frames=frames)
        refs.append(ref.results)
    # exact counts per block (double precision reproduces MDAnalysis's counts)
    for b, ref in enumerate(refs):
        np.testing.assert_array_equal(res.block_count_uint64[b], ref.count)
        np.testing.assert_allclose(res.block_rdf[b], ref.rdf, rtol=1e-12, atol=0)
    rdfs = np.array([ref.rdf for ref in refs])
    sem = rdfs.std(axis=0, ddof=1) / np.sqrt(N_BLOCKS)
    np.testing.assert_allclose(res.rdf_sem, sem, rtol=1e-10, atol=1e-15)
    np.testing.assert_array_equal(res.block_n_frames,
                                  [len(f) for f in block_frames(n_frames, N_BLOCKS)])
    # the totals are those of the whole run
    np.testing.assert_array_equal(res.block_count_uint64.sum(axis=0), res.count_uint64)
    whole = InterRDF(water, water, nbins=40, range=(0.0, 8.0), exclusion_block=(1, 1),
                     precision="double").run()
    np.testing.assert_array_equal(whole.results.count_uint64, res.count_uint64)
    np.testing.assert_array_equal(whole.results.rdf, res.rdf)
    assert sem[15] > 0  # frames differ, so the blocks do


def test_blocks_with_frames_step(water):
    frames = [0, 2, 3, 5, 6, 9, 7]
    rdf = InterRDF(water, water, nbins=20, range=(2.0, 6.0), norm="density",
                   precision="double").run(frames=frames, blocks=2)
    for b, part in enumerate(np.array_split(np.array(frames), 2)):
        ref = MDAInterRDF(water, water, nbins=20, range=(2.0, 6.0), norm="density")
        ref.run(frames=part)
        np.testing.assert_array_equal(rdf.results.block_count_uint64[b], ref.results.count)
        np.testing.assert_allclose(rdf.results.block_rdf[b], ref.results.rdf, rtol=1e-12)


@pytest.mark.parametrize("backend", ["multiprocessing", "dask"])
def test_blocks_same_with_parallel_backends(water, blocked, backend):
    if backend == "dask":
        pytest.importorskip("dask")
    rdf = InterRDF(water, water, nbins=40, range=(0.0, 8.0), exclusion_block=(1, 1),
                   precision="double")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rdf.run(blocks=N_BLOCKS, backend=backend, n_workers=2, n_parts=4)
    for key in ("block_count_uint64", "block_n_frames", "count_uint64"):
        np.testing.assert_array_equal(rdf.results[key], blocked.results[key])
    np.testing.assert_allclose(rdf.results.block_volume_cum, blocked.results.block_volume_cum,
                               rtol=1e-12)
    np.testing.assert_allclose(rdf.results.rdf_sem, blocked.results.rdf_sem, rtol=1e-10)


def test_species_blocks(adk_water):
    sel = adk_water.select_atoms("resname SOL and index 20000:21500 or resname NA+")
    s = SpeciesRDF(sel, nbins=25, range=(0.0, 7.0), exclude_same="residue",
                   precision="double").run(blocks=2)
    res = s.results
    np.testing.assert_array_equal(res.block_count_uint64.sum(axis=0), res.count_uint64)
    oh = (s.groups[s.species.index("O")], s.groups[s.species.index("H")])
    k = s.partial("O", "H").index
    for b, frames in enumerate(block_frames(s.n_frames, 2)):
        ref = MDAInterRDF(*oh, nbins=25, range=(0.0, 7.0), exclude_same="residue")
        ref.run(frames=frames)
        np.testing.assert_array_equal(res.block_count_uint64[b, k], ref.results.count)
    for name in ("rdf", "cdf", "coordination", "total_rdf"):
        blocks = res["block_" + name]
        assert blocks.shape[0] == 2
        np.testing.assert_allclose(res[name + "_sem"],
                                   blocks.std(axis=0, ddof=1) / np.sqrt(2), rtol=1e-12)


def test_interrdf_s_blocks():
    from conftest import load_universe

    u = load_universe("GRO_MEMPROT", "XTC_MEMPROT")
    s1 = u.select_atoms("name ZND and resid 289")
    s2 = u.select_atoms("(name OD1 or name OD2) and resid 51 and sphzone 5.0 (resid 289)")
    ags = [[s1, s2], [s2, s1]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rdf = InterRDF_s(u, ags, nbins=30, range=(0.0, 6.0), precision="double")
        rdf.run(blocks=2)
        for b, frames in enumerate(block_frames(rdf.n_frames, 2)):
            ref = MDAInterRDF_s(u, ags, nbins=30, range=(0.0, 6.0)).run(frames=frames)
            for k in range(2):
                np.testing.assert_array_equal(rdf.results.block_count[k][b], ref.results.count[k])
                np.testing.assert_allclose(rdf.results.block_rdf[k][b], ref.results.rdf[k],
                                           rtol=1e-12)
    for k in range(2):
        np.testing.assert_array_equal(rdf.results.block_count[k].sum(axis=0),
                                      rdf.results.count[k])
        assert rdf.results.rdf_sem[k].shape == rdf.results.rdf[k].shape


def test_no_blocks_no_block_results(water):
    rdf = InterRDF(water, water, nbins=10).run(stop=2)
    assert not any(key.startswith("block_") or key.endswith("_sem") for key in rdf.results)


@pytest.mark.parametrize(("blocks", "error", "match"), [
    (1, ValueError, "at least 2"),
    (11, ValueError, "more than the 10 frames"),
    (2.5, TypeError, "integer"),
    (True, TypeError, "integer"),
])
def test_bad_blocks(water, blocks, error, match):
    with pytest.raises(error, match=match):
        InterRDF(water, water).run(blocks=blocks)
