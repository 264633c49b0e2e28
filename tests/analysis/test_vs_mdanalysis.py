"""mdakit_fastrdf.InterRDF against MDAnalysis.analysis.rdf.InterRDF on real trajectories.

Data from MDAnalysisTests (each test is skipped if its files are missing):

* ``TPR, XTC`` / ``GRO``: adenylate kinase in water, rhombic-dodecahedron (triclinic) box;
* ``GRO_MEMPROT, XTC_MEMPROT``: membrane protein, hexagonal box;
* ``PSF_TRICLINIC, DCD_TRICLINIC``: water in a strongly skewed triclinic box;
* ``TRZ_psf, TRZ`` and ``PDB_sub_sol`` / ``PDB_full``: orthorhombic boxes;
* ``PSF, DCD``: no box.

``precision='double'`` must reproduce MDAnalysis' counts exactly (and bins, edges, rdf,
volume_cum); ``precision='single'`` may only move a tiny number of pairs lying within
float32 rounding of a bin edge: ``sum |diff| <= max(4, 1e-5 * total)``.
"""

import warnings

import numpy as np
import pytest
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

from conftest import box_widths, brute_force_counts, reference_edges, requires_gpu, shared_universe

from mdakit_fastrdf import InterRDF

# ---------------------------------------------------------------------------------------
# Universes (loaded once per session, shared with other modules: conftest.shared_universe)
# ---------------------------------------------------------------------------------------


def _universe(key):
    files = {
        "adk": ("TPR", "XTC"),
        "adk_gro": ("GRO",),
        "memprot": ("GRO_MEMPROT", "XTC_MEMPROT"),
        "water_tric": ("PSF_TRICLINIC", "DCD_TRICLINIC"),
        "trz": ("TRZ_psf", "TRZ"),
        "sub_sol": ("PDB_sub_sol",),
        "pdb_full": ("PDB_full",),
        "psf_dcd": ("PSF", "DCD"),
    }[key]
    return shared_universe(*files)  # adk: the Universes of the adk_water/adk_vacuum fixtures


def _sel(u, spec):
    """``'sel[:n]'`` style selection: an MDAnalysis selection string, optionally sliced."""
    if "|" in spec:
        a, b = spec.split("|")
        return _sel(u, a) + _sel(u, b)
    if spec.endswith("]") and "[:" in spec:
        s, n = spec[:-1].split("[:")
        return u.select_atoms(s)[: int(n)]
    return u.select_atoms(spec)


# id, universe, g1 selection, g2 selection (None: g2 is g1), InterRDF kwargs, n frames
CASES = [
    # triclinic (rhombic dodecahedron), 3 frames
    ("adk-ow-self-default", "adk", "name OW[:1000]", None, {}, 3),
    ("adk-ow-self-r8-density", "adk", "name OW[:1000]", None,
     {"range": (0.0, 8.0), "norm": "density"}, 3),
    ("adk-ow-self-offset-none", "adk", "name OW[:1000]", None,
     {"range": (2.5, 12.0), "nbins": 37, "norm": "none"}, 3),
    ("adk-ow-self-block11", "adk", "name OW[:1000]", None, {"exclusion_block": (1, 1)}, 3),
    ("adk-ow-hw-block12", "adk", "name OW[:600]", "name HW1 HW2[:1200]",
     {"exclusion_block": (1, 2)}, 3),
    ("adk-ow-hw-block12-r8-density", "adk", "name OW[:600]", "name HW1 HW2[:1200]",
     {"exclusion_block": (1, 2), "range": (0.0, 8.0), "norm": "density"}, 3),
    ("adk-ca-ow", "adk", "name CA", "name OW[:1000]", {}, 3),
    ("adk-ca-ow-offset", "adk", "name CA", "name OW[:1000]",
     {"range": (2.5, 12.0), "nbins": 37}, 3),
    ("adk-sol-residue", "adk", "resname SOL[:1500]", None, {"exclude_same": "residue"}, 3),
    ("adk-ca-ow-segment", "adk", "name CA|name OW[:400]", None,
     {"exclude_same": "segment", "range": (0.0, 8.0)}, 3),
    ("adk-ca-ow-chain", "adk", "name CA|name OW[:400]", None,
     {"exclude_same": "chain", "norm": "none"}, 3),
    ("adk-few-atoms", "adk", "name CA[:5]", "name OW[:300]", {}, 3),  # MDA: brute force
    ("adk-gro-ow-self", "adk_gro", "name OW[:800]", None, {}, 1),
    ("adk-gro-ow-hw1-block11", "adk_gro", "name OW[:600]", "name HW1[:600]",
     {"exclusion_block": (1, 1), "norm": "density"}, 1),
    # hexagonal
    ("memprot-p-self", "memprot", "name P", None, {"range": (0.0, 30.0), "nbins": 60}, 3),
    ("memprot-ca-p", "memprot", "name CA", "name P", {"norm": "density"}, 3),
    # strongly skewed triclinic; range[1] below half the smallest width (MDAnalysis' own
    # minimum image is only reliable there, see test_skewed_box_beyond_half_width)
    ("tric-oh2-h-block12", "water_tric", "name OH2", "name H1 H2",
     {"exclusion_block": (1, 2), "range": (0.0, 8.0)}, 3),
    ("tric-all-self", "water_tric", "all", None, {"range": (0.0, 8.5), "nbins": 40}, 3),
    ("tric-residue", "water_tric", "all", None,
     {"exclude_same": "residue", "range": (1.0, 8.5), "nbins": 30, "norm": "density"}, 3),
    # orthorhombic
    ("trz-o-n", "trz", "name O", "name N", {}, 3),
    ("trz-o-n-r8", "trz", "name O", "name N", {"range": (0.0, 8.0), "norm": "none"}, 3),
    ("trz-o-self-block11", "trz", "name O", None,
     {"exclusion_block": (1, 1), "range": (2.5, 12.0), "nbins": 37}, 3),
    ("sub_sol-ow-self", "sub_sol", "name OW[:1500]", None, {}, 1),
    ("sub_sol-ow-self-density", "sub_sol", "name OW[:1500]", None,
     {"range": (0.0, 8.0), "norm": "density"}, 1),
    ("pdb_full-chain", "pdb_full", "name CA O", None, {"exclude_same": "chain"}, 1),
    ("pdb_full-segment", "pdb_full", "name CA", "name O",
     {"exclude_same": "segment", "range": (0.0, 8.0)}, 1),
    ("pdb_full-residue", "pdb_full", "name CA O", None,
     {"exclude_same": "residue", "norm": "density"}, 1),
    # no box (norm 'rdf' needs a box; see test_errors)
    ("psf-ca-self-none", "psf_dcd", "name CA", None, {"norm": "none"}, 3),
    ("psf-ca-heavy-density", "psf_dcd", "name CA", "not name H*", {"norm": "density"}, 3),
    ("psf-heavy-residue-r8", "psf_dcd", "not name H*[:1000]", None,
     {"exclude_same": "residue", "range": (0.0, 8.0), "norm": "density"}, 3),
    ("psf-ca-self-block11-offset", "psf_dcd", "name CA", None,
     {"exclusion_block": (1, 1), "range": (2.5, 12.0), "nbins": 37, "norm": "none"}, 3),
    ("psf-few-atoms", "psf_dcd", "name CA[:4]", "name CA", {"norm": "none"}, 3),
]

_MDA_CACHE = {}


def _groups(case):
    _, ukey, s1, s2, kw, n = case
    u = _universe(ukey)
    g1 = _sel(u, s1)
    g2 = g1 if s2 is None else _sel(u, s2)
    assert len(g1) > 0 and len(g2) > 0
    return u, g1, g2


def _mda_result(case):
    """MDAnalysis' InterRDF result for a case (computed once for both precisions)."""
    cid = case[0]
    if cid not in _MDA_CACHE:
        u, g1, g2 = _groups(case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _MDA_CACHE[cid] = MDAInterRDF(g1, g2, **case[4]).run(stop=case[5]).results
    return _MDA_CACHE[cid]


def assert_matches_mdanalysis(new, ref, precision, norm):
    """The comparison rules of this module, shared by all tests."""
    np.testing.assert_array_equal(new.edges, ref.edges)
    np.testing.assert_array_equal(new.bins, ref.bins)
    assert new.count.dtype == np.float64
    assert new.count_uint64.dtype == np.uint64
    np.testing.assert_array_equal(new.count, new.count_uint64.astype(np.float64))
    if norm == "rdf":
        np.testing.assert_allclose(new.volume_cum, ref.volume_cum, rtol=1e-12)
    else:
        assert "volume_cum" not in new  # as MDAnalysis: only with norm='rdf'
    if precision == "double":
        np.testing.assert_array_equal(new.count, ref.count)
        np.testing.assert_allclose(new.rdf, ref.rdf, rtol=1e-12)
    else:
        diff = np.abs(new.count - ref.count).sum()
        assert diff <= max(4, 1e-5 * ref.count.sum()), (
            f"single precision moved {diff} counts of {ref.count.sum()}; bins "
            f"{np.nonzero(new.count != ref.count)[0].tolist()}"
        )
        # same normalisation: rdf / count is the same factor per bin
        np.testing.assert_allclose(new.rdf * ref.count, ref.rdf * new.count, rtol=1e-12,
                                   atol=0)


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_mdanalysis(case, precision):
    """Counts, bins, edges, rdf and volume_cum equal MDAnalysis' InterRDF (exactly for
    precision='double'; single precision moves at most a handful of edge pairs)."""
    ref = _mda_result(case)
    u, g1, g2 = _groups(case)
    kw = case[4]
    new = InterRDF(g1, g2, precision=precision, **kw).run(stop=case[5]).results
    assert_matches_mdanalysis(new, ref, precision, kw.get("norm", "rdf"))
    assert new.count.sum() > 0


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_mdanalysis_on_gpu(case, precision):
    """The same on the GPU (device='cuda'): MDAnalysis' counts bit for bit in double
    precision (the default), and in single precision the CPU's single-precision counts bit
    for bit (and so the same handful of moved edge pairs at most)."""
    ref = _mda_result(case)
    u, g1, g2 = _groups(case)
    kw = case[4]
    new = InterRDF(g1, g2, device="cuda", precision=precision, **kw).run(stop=case[5]).results
    assert_matches_mdanalysis(new, ref, precision, kw.get("norm", "rdf"))
    if precision == "single":
        cpu = InterRDF(g1, g2, device="cpu", precision="single", **kw).run(stop=case[5]).results
        np.testing.assert_array_equal(new.count_uint64, cpu.count_uint64)


@pytest.mark.parametrize("precision", ["double", "single"])
def test_frame_selection_matches_mdanalysis(precision):
    """start/stop/step and an explicit frames list select the same frames as MDAnalysis
    (counts and n_frames-dependent normalisation)."""
    u = _universe("adk")
    ow = u.select_atoms("name OW")[:500]
    for run_kw in [dict(start=1, stop=7, step=3), dict(frames=[0, 4, 9])]:
        ref = MDAInterRDF(ow, ow, range=(0.0, 10.0)).run(**run_kw).results
        new = InterRDF(ow, ow, range=(0.0, 10.0), precision=precision).run(**run_kw).results
        assert_matches_mdanalysis(new, ref, precision, "rdf")


def test_default_parameters_are_mdanalysis_defaults():
    """Defaults (nbins=75, range=(0, 15), norm='rdf', precision='double') give MDAnalysis's
    bins, edges and counts, bit for bit."""
    u = _universe("adk")
    ow = u.select_atoms("name OW")[:700]
    ref = MDAInterRDF(ow, ow).run(stop=2).results
    r = InterRDF(ow, ow)
    assert r.precision == "double"
    new = r.run(stop=2).results
    assert len(new.bins) == 75 and new.edges[-1] == 15.0
    np.testing.assert_array_equal(new.count, ref.count)
    assert_matches_mdanalysis(new, ref, "double", "rdf")


def test_run_twice_gives_same_result():
    """Calling run() again restarts the accumulation (no double counting)."""
    u = _universe("adk")
    ow = u.select_atoms("name OW")[:300]
    r = InterRDF(ow, ow, precision="double")
    first = r.run(stop=2).results.count_uint64.copy()
    second = r.run(stop=2).results.count_uint64
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("precision", ["double", "single"])
def test_ortho_bruteforce_path_of_mdanalysis(precision):
    """Orthorhombic box with range[1] > 0.3 * L, where MDAnalysis' capped_distance uses
    its brute-force distance_array (minimum image computed as ``L * (s - round(s))`` with
    ``s = float32(1/L) * dx``). The package promises exact equality with MDAnalysis in
    double precision for every MDAnalysis code path."""
    u = _universe("trz")
    o = u.select_atoms("name O")
    kw = dict(range=(0.0, 27.0), nbins=75)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = MDAInterRDF(o, o, **kw).run().results
        new = InterRDF(o, o, precision=precision, **kw).run().results
    assert_matches_mdanalysis(new, ref, precision, "rdf")


@pytest.mark.parametrize("precision", ["double"])
def test_ortho_bruteforce_minimal_pair(precision):
    """Minimal two-atom version of test_ortho_bruteforce_path_of_mdanalysis: one atom in
    g1 (< 10 atoms: MDAnalysis uses brute force), box 10 A cube, atoms at (1, 1, 1) and
    (4, 2, 3). The exact float64 distance is sqrt(14) = 3.7416573867739413, MDAnalysis'
    brute-force orthorhombic path computes 3.7416574425289815 (its minimum image scales by
    float32(1/L) * L != 1). An inner bin edge at 3.74165740 lies between the two values."""
    from conftest import make_universe

    coords = np.array([[[1.0, 1.0, 1.0], [4.0, 2.0, 3.0]]], dtype=np.float32)
    u = make_universe(coords, (10.0, 10.0, 10.0, 90.0, 90.0, 90.0))
    kw = dict(nbins=2, range=(0.0, 7.4833148), norm="none")
    ref = MDAInterRDF(u.atoms[:1], u.atoms[1:], **kw).run().results
    new = InterRDF(u.atoms[:1], u.atoms[1:], precision=precision, **kw).run().results
    assert_matches_mdanalysis(new, ref, precision, "none")


def test_skewed_box_beyond_half_width():
    """Beyond half the smallest box width MDAnalysis' minimum image (27 neighbouring images
    of positions wrapped into the cell) can miss the true nearest image in a skewed cell;
    the package promises the exact minimum image for every distance up to range[1], so
    there it must equal the brute-force reference (and may legitimately differ from
    MDAnalysis)."""
    u = _universe("water_tric")
    g = u.atoms
    rng_range, nbins = (0.0, 30.0), 75
    assert rng_range[1] > 0.5 * min(box_widths(u.dimensions))
    edges = reference_edges(nbins, rng_range)
    from MDAnalysis.lib.distances import apply_PBC

    ref = np.zeros(nbins, dtype=np.int64)
    for ts in u.trajectory[:2]:
        # MDAnalysis and the package take distances between positions wrapped into the
        # primary cell in float32; do the same before the float64 brute force.
        p = apply_PBC(g.positions, ts.dimensions)
        ref += brute_force_counts(p, p, ts.dimensions, edges)
    new = InterRDF(g, g, nbins=nbins, range=rng_range, precision="double").run(stop=2)
    np.testing.assert_array_equal(new.results.count_uint64.astype(np.int64), ref)


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("kind", ["ortho", "triclinic", "nobox"])
@pytest.mark.parametrize("n2, rmax", [(400, 6.0), (400, 14.0), (6, 9.0)],
                         ids=["grid", "bruteforce", "few-atoms"])
def test_positions_outside_primary_cell(kind, n2, rmax, precision):
    """Positions far outside the primary cell (several box lengths away, negative too),
    which MDAnalysis wraps in float32 before computing distances (or, without a box, shifts
    for its grid search). The result must still equal MDAnalysis' -- through both of its
    code paths (grid search for short ranges, brute force for long ranges / few atoms)."""
    from conftest import make_universe

    rng = np.random.default_rng([n2, int(rmax), len(kind)])
    dims = {
        "ortho": (25.0, 27.0, 29.0, 90.0, 90.0, 90.0),
        "triclinic": (26.0, 28.0, 30.0, 75.0, 95.0, 110.0),
        "nobox": None,
    }[kind]
    n1 = 300
    coords = (rng.random((2, n1 + n2, 3)) * 120.0 - 50.0).astype(np.float32)
    u = make_universe(coords, dims)
    g1, g2 = u.atoms[:n1], u.atoms[n1:]
    norm = "none" if dims is None else "rdf"
    kw = dict(range=(0.0, rmax), nbins=50, norm=norm)
    ref = MDAInterRDF(g1, g2, **kw).run().results
    new = InterRDF(g1, g2, precision=precision, **kw).run().results
    assert_matches_mdanalysis(new, ref, precision, norm)
