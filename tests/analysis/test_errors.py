"""Input validation, deprecated attributes, pickling and the small public API surface.

Each invalid input must raise a ValueError or TypeError whose message names the offending
parameter, so users know what to fix. Where MDAnalysis already validates (norm,
exclude_same, exclusion_block with exclude_same) the package keeps MDAnalysis' behaviour.
"""

import pickle
import shutil

import numpy as np
import pytest
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

from conftest import make_universe, random_positions_in_box

import mdakit_fastrdf
from mdakit_fastrdf import InterRDF, build_info

BOX = (20.0, 20.0, 20.0, 90.0, 90.0, 90.0)


@pytest.fixture(scope="module")
def u():
    """30 atoms in 10 residues of 3, ortho box, 3 frames."""
    rng = np.random.default_rng(3)
    coords = random_positions_in_box(rng, 30, BOX, n_frames=3)
    return make_universe(coords, BOX, atoms_per_residue=3)


@pytest.fixture(scope="module")
def u_nobox():
    rng = np.random.default_rng(4)
    coords = (rng.random((3, 30, 3)) * 15).astype(np.float32)
    return make_universe(coords, None, atoms_per_residue=3)


# ---------------------------------------------------------------------------------------
# Groups
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["g1", "g2"])
def test_empty_atomgroup(u, which):
    """An empty g1 or g2 is rejected at construction with a message naming it (MDAnalysis
    would silently produce an all-zero / NaN rdf)."""
    empty, full = u.atoms[[]], u.atoms
    args = (empty, full) if which == "g1" else (full, empty)
    with pytest.raises(ValueError, match=which):
        InterRDF(*args)


# ---------------------------------------------------------------------------------------
# Histogram parameters
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("nbins", [0, -1, -75])
def test_nbins_below_one(u, nbins):
    """nbins < 1 is a ValueError naming nbins."""
    with pytest.raises(ValueError, match="nbins"):
        InterRDF(u.atoms, u.atoms, nbins=nbins)


@pytest.mark.parametrize("nbins", [2.5, "10", 10.0, None, True])
def test_nbins_not_integer(u, nbins):
    """A non-integer nbins (float, string, None, bool) is a TypeError naming nbins."""
    with pytest.raises(TypeError, match="nbins"):
        InterRDF(u.atoms, u.atoms, nbins=nbins)


@pytest.mark.parametrize("nbins", [1, np.int64(7), np.int32(3)])
def test_nbins_integer_types_accepted(u, nbins):
    """Python and NumPy integers are accepted; nbins=1 gives a single bin."""
    r = InterRDF(u.atoms, u.atoms, nbins=nbins, range=(0, 9), precision="double").run()
    assert len(r.results.bins) == int(nbins)
    ref = MDAInterRDF(u.atoms, u.atoms, nbins=int(nbins), range=(0, 9)).run()
    np.testing.assert_array_equal(r.results.count, ref.results.count)


@pytest.mark.parametrize(
    "rng_range",
    [(5.0, 5.0), (10.0, 2.0), (-1.0, 5.0), (np.nan, 5.0), (0.0, np.nan), (0.0, np.inf)],
    ids=["empty", "decreasing", "negative", "nan-min", "nan-max", "inf-max"],
)
def test_invalid_range(u, rng_range):
    """range must be finite, increasing and start at >= 0: ValueError naming range."""
    with pytest.raises(ValueError, match="range"):
        InterRDF(u.atoms, u.atoms, range=rng_range)


@pytest.mark.parametrize("norm", ["foo", "RDFs", "", "rdf "])
def test_invalid_norm(u, norm):
    """An unknown norm is a ValueError naming it (as MDAnalysis). Note norm=None is
    *valid* in MDAnalysis (``str(None).lower() == 'none'``) and so here too."""
    with pytest.raises(ValueError, match="norm"):
        InterRDF(u.atoms, u.atoms, norm=norm)


@pytest.mark.parametrize("norm", ["RDF", "Density", "NONE", None])
def test_norm_is_case_insensitive(u, norm):
    """norm is lower-cased as in MDAnalysis (``str(norm).lower()``, so None means 'none')."""
    r = InterRDF(u.atoms, u.atoms, norm=norm, precision="double").run()
    ref = MDAInterRDF(u.atoms, u.atoms, norm=norm).run()
    np.testing.assert_allclose(r.results.rdf, ref.results.rdf, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Exclusions
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [(4, 4), (3, 7), (7, 3)])
def test_exclusion_block_not_dividing_group_sizes(u, block):
    """exclusion_block must consist of whole blocks of both groups: ValueError naming
    exclusion_block (MDAnalysis would silently use a fractional number of blocks)."""
    with pytest.raises(ValueError, match="exclusion_block"):
        InterRDF(u.atoms, u.atoms, exclusion_block=block)


def test_unknown_exclude_same(u):
    """exclude_same must be residue/segment/chain (MDAnalysis' message)."""
    with pytest.raises(ValueError, match="exclude_same"):
        InterRDF(u.atoms, u.atoms, exclude_same="molecule")


def test_exclusion_block_with_exclude_same(u):
    """exclusion_block and exclude_same cannot be combined (as MDAnalysis)."""
    with pytest.raises(ValueError, match="exclu"):
        InterRDF(u.atoms, u.atoms, exclusion_block=(3, 3), exclude_same="residue")


def test_valid_exclusions_accepted(u):
    """The valid forms are accepted and agree with MDAnalysis."""
    for kw in [dict(exclusion_block=(3, 3)), dict(exclusion_block=(1, 1)),
               dict(exclude_same="residue"), dict(exclude_same="segment"),
               dict(exclude_same="chain")]:
        r = InterRDF(u.atoms, u.atoms, range=(0, 9), precision="double", **kw).run()
        ref = MDAInterRDF(u.atoms, u.atoms, range=(0, 9), **kw).run()
        np.testing.assert_array_equal(r.results.count, ref.results.count)


# ---------------------------------------------------------------------------------------
# Trajectory contents
# ---------------------------------------------------------------------------------------


def test_nan_coordinates_raise_in_run():
    """A frame with NaN positions makes run() fail with a ValueError that says so (instead
    of silently dropping pairs)."""
    rng = np.random.default_rng(5)
    coords = random_positions_in_box(rng, 20, BOX, n_frames=3)
    coords[1, 7, 1] = np.nan
    uu = make_universe(coords, BOX)
    r = InterRDF(uu.atoms[:10], uu.atoms[10:])
    with pytest.raises(ValueError, match="(?i)coordinates|nan"):
        r.run()
    # the frames before the bad one are fine
    InterRDF(uu.atoms[:10], uu.atoms[10:]).run(stop=1)


def test_nan_coordinates_outside_groups_are_ignored():
    """NaN positions of atoms that are in neither group do not matter."""
    rng = np.random.default_rng(6)
    coords = random_positions_in_box(rng, 20, BOX, n_frames=2)
    coords[:, 19] = np.nan
    uu = make_universe(coords, BOX)
    r = InterRDF(uu.atoms[:10], uu.atoms[10:19], precision="double").run()
    ref = MDAInterRDF(uu.atoms[:10], uu.atoms[10:19]).run()
    np.testing.assert_array_equal(r.results.count, ref.results.count)


def test_norm_rdf_without_box_raises_in_run(u_nobox):
    """norm='rdf' needs a box volume: on a trajectory without box run() raises a
    ValueError mentioning the box / norm (MDAnalysis would divide by a zero volume)."""
    assert u_nobox.dimensions is None
    r = InterRDF(u_nobox.atoms, u_nobox.atoms)
    with pytest.raises(ValueError, match="(?i)box|norm"):
        r.run()


@pytest.mark.parametrize("norm", ["none", "density"])
@pytest.mark.parametrize("precision", ["double", "single"])
def test_no_box_density_and_none_work(u_nobox, norm, precision):
    """Without a box, norm='none' and 'density' work and match MDAnalysis."""
    r = InterRDF(u_nobox.atoms[:12], u_nobox.atoms[12:], norm=norm, range=(0, 12),
                 precision=precision).run()
    ref = MDAInterRDF(u_nobox.atoms[:12], u_nobox.atoms[12:], norm=norm, range=(0, 12)).run()
    if precision == "double":
        np.testing.assert_array_equal(r.results.count, ref.results.count)
        np.testing.assert_allclose(r.results.rdf, ref.results.rdf, rtol=1e-12)
    else:
        assert np.abs(r.results.count - ref.results.count).sum() <= 4
    assert "volume_cum" not in r.results


# ---------------------------------------------------------------------------------------
# Package-specific keywords
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["gpu", "banana", "", "cpu0"])
def test_invalid_device(u, device):
    """Unknown devices are a ValueError naming device."""
    with pytest.raises(ValueError, match="device"):
        InterRDF(u.atoms, u.atoms, device=device)


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_valid_devices(u, device):
    """'auto' and 'cpu' run and agree with MDAnalysis."""
    r = InterRDF(u.atoms, u.atoms, device=device, precision="double").run()
    ref = MDAInterRDF(u.atoms, u.atoms).run()
    np.testing.assert_array_equal(r.results.count, ref.results.count)


def _gpu_present():
    return shutil.which("nvidia-smi") is not None


def test_cuda_without_cuda_build(u):
    """device='cuda' on a build without CUDA kernels (or without a GPU) fails clearly,
    mentioning cuda -- at construction or at the latest in run()."""
    if build_info().get("cuda") and _gpu_present():
        pytest.skip("this build has CUDA kernels and a GPU is present")
    with pytest.raises((RuntimeError, ValueError), match="(?i)cuda"):
        InterRDF(u.atoms, u.atoms, device="cuda").run()


@pytest.mark.parametrize("precision", ["half", "float", "Double", "", None])
def test_invalid_precision(u, precision):
    """precision must be 'single' or 'double': ValueError naming precision."""
    with pytest.raises(ValueError, match="precision"):
        InterRDF(u.atoms, u.atoms, precision=precision)


@pytest.mark.parametrize("n_threads", [0, -1])
def test_invalid_n_threads(u, n_threads):
    """n_threads must be >= 1 (or None): ValueError naming n_threads."""
    with pytest.raises(ValueError, match="n_threads"):
        InterRDF(u.atoms, u.atoms, n_threads=n_threads)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_n_threads_values_give_identical_counts(u, n_threads):
    """Any positive thread count (even more than the cores) gives the same counts."""
    r = InterRDF(u.atoms, u.atoms, n_threads=n_threads, precision="single").run()
    ref = InterRDF(u.atoms, u.atoms, n_threads=1, precision="single").run()
    np.testing.assert_array_equal(r.results.count_uint64, ref.results.count_uint64)


def test_package_keywords_are_keyword_only(u):
    """device/precision/n_threads come after the MDAnalysis signature and are keyword-only,
    so positional MDAnalysis calls keep their meaning."""
    r = InterRDF(u.atoms, u.atoms, 10, (0.0, 5.0), "density", None, None, "serial")
    r.run()
    assert len(r.results.bins) == 10 and r.results.edges[-1] == 5.0
    with pytest.raises(TypeError):
        InterRDF(u.atoms, u.atoms, 10, (0.0, 5.0), "density", None, None, "serial", "cpu")


# ---------------------------------------------------------------------------------------
# Deprecated attributes, API
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("attr", ["count", "bins", "edges", "rdf"])
def test_deprecated_attributes_warn(u, attr):
    """r.count / r.bins / r.edges / r.rdf still work but warn DeprecationWarning, as in
    MDAnalysis, and return the results.* values."""
    r = InterRDF(u.atoms, u.atoms).run()
    with pytest.warns(DeprecationWarning, match=attr):
        value = getattr(r, attr)
    np.testing.assert_array_equal(value, r.results[attr])


def test_supported_backends():
    """The parallel backends of run() are those of MDAnalysis' InterRDF, and 'node'."""
    assert InterRDF.get_supported_backends() == ("serial", "multiprocessing", "dask", "node")
    assert InterRDF._analysis_algorithm_is_parallelizable


def test_build_info():
    """build_info() reports version, threads, the compiled SIMD variants and CUDA."""
    info = build_info()
    assert isinstance(info, dict)
    for key in ("version", "threads", "max_threads", "cpu_isa", "cuda"):
        assert key in info
    assert isinstance(info["version"], str) and info["version"]
    assert isinstance(info["threads"], str) and info["max_threads"] >= 1
    assert isinstance(info["cuda"], bool)
    assert isinstance(info["cpu_isa"], list) and info["cpu_isa"]
    assert all(isinstance(s, str) for s in info["cpu_isa"])
    assert mdakit_fastrdf.InterRDF is InterRDF


def test_results_before_run(u):
    """Nothing is computed at construction."""
    r = InterRDF(u.atoms, u.atoms)
    assert "count" not in r.results


# ---------------------------------------------------------------------------------------
# Pickling
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["double", "single"])
def test_pickle_before_and_after_run(u, precision):
    """The analysis object pickles before run() (as the parallel backends do) and after;
    an unpickled fresh object runs to the same result, an unpickled finished one keeps
    its results."""
    r = InterRDF(u.atoms[:15], u.atoms[15:], range=(0, 9), precision=precision,
                 exclusion_block=(3, 3))
    fresh = pickle.loads(pickle.dumps(r))
    r.run()
    done = pickle.loads(pickle.dumps(r))
    np.testing.assert_array_equal(done.results.count_uint64, r.results.count_uint64)
    np.testing.assert_array_equal(done.results.rdf, r.results.rdf)
    fresh.run()
    np.testing.assert_array_equal(fresh.results.count_uint64, r.results.count_uint64)
    np.testing.assert_array_equal(fresh.results.rdf, r.results.rdf)
    # and it can run again after unpickling a finished object
    done.run()
    np.testing.assert_array_equal(done.results.count_uint64, r.results.count_uint64)


@pytest.mark.parametrize("verbose", [True, False])
def test_verbose_flag(u, verbose):
    """verbose= is accepted by the constructor and by run(), as in MDAnalysis."""
    r = InterRDF(u.atoms, u.atoms, verbose=verbose, precision="double").run(verbose=verbose)
    ref = MDAInterRDF(u.atoms, u.atoms).run()
    np.testing.assert_array_equal(r.results.count, ref.results.count)


@pytest.mark.filterwarnings("ignore:The `u` attribute is superflous")
@pytest.mark.parametrize("cls", ["InterRDF", "InterRDF_s", "SpeciesRDF"])
@pytest.mark.parametrize("sel", [dict(stop=0), dict(start=5, stop=5), dict(frames=[])])
def test_no_frames_selected(u, cls, sel):
    """A frame selection with no frame is a ValueError naming the selection, not a division
    by zero in the normalisation (MDAnalysis's InterRDF divides by n_frames = 0)."""
    import mdakit_fastrdf

    ag = u.atoms[:20]
    obj = {"InterRDF": lambda: mdakit_fastrdf.InterRDF(ag, ag),
           "InterRDF_s": lambda: mdakit_fastrdf.InterRDF_s(u, [[ag, ag]]),
           "SpeciesRDF": lambda: mdakit_fastrdf.SpeciesRDF(ag, by="name")}[cls]()
    with pytest.raises(ValueError, match="select no frame"):
        obj.run(**sel)
