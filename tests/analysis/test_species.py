"""SpeciesRDF: every partial against MDAnalysis's InterRDF for the same two species.

References are MDAnalysis's InterRDF run on the species' AtomGroups (or conftest's NumPy
brute force); never this package.
"""

import warnings

import numpy as np
import pytest
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

from conftest import (
    brute_force_counts,
    load_universe,
    make_universe,
    random_positions_in_box,
    reference_edges,
)

from mdakit_fastrdf import SpeciesRDF


def _mda(g1, g2, _run=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MDAInterRDF(g1, g2, **kw).run(**(_run or {}))


def _assert_partials_equal_mdanalysis(s, run_kw, skip=lambda a, b: False, **kw):
    checked = 0
    for k, (a, b) in enumerate(s.results.pairs):
        if skip(a, b):
            continue
        ga, gb = s.groups[a], s.groups[b]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = MDAInterRDF(ga, gb, **kw).run(**run_kw)
        np.testing.assert_array_equal(s.results.count[k], ref.results.count,
                                      err_msg=str(s.results.pair_labels[k]))
        np.testing.assert_allclose(s.results.rdf[k], ref.results.rdf, rtol=1e-13, atol=0,
                                   err_msg=str(s.results.pair_labels[k]))
        checked += 1
    return checked


@pytest.fixture(scope="module")
def adk_subset(adk_water):
    """adk in water (triclinic box): the protein, ~1000 waters (with TIP4P's element-less
    virtual sites) and the 4 Na+: 7 element species of 4 to ~4000 atoms."""
    return adk_water.select_atoms("protein or resname NA+ or (resname SOL and resid 300:550)")


def test_adk_elements_equal_mdanalysis_exactly(adk_subset):
    s = SpeciesRDF(adk_subset, by="element", precision="double").run(stop=3)
    assert len(s.results.species) == 7
    assert set(s.results.species) == {"", "C", "H", "N", "O", "S", "Na"}
    assert list(s.results.n_atoms) == sorted(s.results.n_atoms, reverse=True)
    assert s.results.count.shape == (28, 75) and s.results.rdf.shape == (28, 75)
    assert _assert_partials_equal_mdanalysis(s, dict(stop=3)) == 28
    assert s.results.count_uint64.dtype == np.uint64


@pytest.mark.parametrize("norm", ["density", "none"])
def test_adk_norms(adk_subset, norm):
    s = SpeciesRDF(adk_subset, by="element", norm=norm, nbins=50, range=(1.0, 9.0),
                   precision="double").run(stop=2)
    big = s.results.n_atoms[0]
    # the largest partial is checked through the total below; keep the run short
    n = _assert_partials_equal_mdanalysis(
        s, dict(stop=2), skip=lambda a, b: s.results.n_atoms[a] == big,
        nbins=50, range=(1.0, 9.0), norm=norm)
    assert n == 21


@pytest.mark.slow  # about 5 s
def test_gro_types_equal_mdanalysis_exactly():
    """GRO (no elements; 7 types incl. DUMMY and NA), triclinic box, one frame."""
    u = load_universe("GRO")
    ag = u.select_atoms("protein or resname NA+ or (resname SOL and resid 300:500)")
    s = SpeciesRDF(ag, by="type", precision="double").run()
    assert set(s.results.species) == {"C", "DUMMY", "H", "N", "NA", "O", "S"}
    assert _assert_partials_equal_mdanalysis(s, {}) == 28


def test_total_equals_interrdf_of_everything(adk_subset):
    s = SpeciesRDF(adk_subset, precision="double").run(stop=2)
    ref = _mda(adk_subset, adk_subset, _run=dict(stop=2))
    np.testing.assert_array_equal(s.results.total_count, ref.results.count)
    np.testing.assert_allclose(s.results.total_rdf, ref.results.rdf, rtol=1e-12)
    # documented weights: g = sum_ab x_a x_b g_ab (ordered pairs), x_a = N_a / N
    x = s.results.n_atoms / s.results.n_atoms.sum()
    w = np.array([x[a] * x[b] * (1 if a == b else 2) for a, b in s.results.pairs])
    np.testing.assert_allclose((w[:, None] * s.results.rdf).sum(axis=0), s.results.total_rdf,
                               rtol=1e-12, atol=1e-12)


def test_exclude_same_residue_equals_mdanalysis(adk_subset):
    s = SpeciesRDF(adk_subset, exclude_same="residue", precision="double").run(stop=1)
    big = s.results.n_atoms[0]
    n = _assert_partials_equal_mdanalysis(
        s, dict(stop=1), skip=lambda a, b: s.results.n_atoms[a] == big and a == b,
        exclude_same="residue")
    assert n == 27
    # the intramolecular O-H of water is gone from the first bins
    oh = s.partial("O", "H")
    assert oh.count[:5].sum() == 0


def test_exclude_self_equals_exclusion_block(adk_subset):
    s = SpeciesRDF(adk_subset, exclude_self=True, precision="double", nbins=30,
                   range=(0.0, 6.0)).run(stop=1)
    for a, b in [("N", "N"), ("S", "S"), ("N", "S")]:
        p = s.partial(a, b)
        ga, gb = s.groups[s.results.species.index(a)], s.groups[s.results.species.index(b)]
        kw = dict(exclusion_block=(1, 1)) if a == b else {}
        ref = _mda(ga, gb, nbins=30, range=(0.0, 6.0), _run=dict(stop=1), **kw)
        np.testing.assert_array_equal(p.count, ref.results.count)
        np.testing.assert_allclose(p.rdf, ref.results.rdf, rtol=1e-13)


def test_psf_dcd_no_box(adk_vacuum):
    """PSF/DCD: no box, no elements. Positions are used as stored; MDAnalysis's grid search
    shifts each pair's positions by that pair's minimum, its brute force does not (see the
    Notes of SpeciesRDF): brute-force partials are equal bit for bit, grid ones may move a
    pair lying within float32 rounding of an edge, and never change a partial's total."""
    u = adk_vacuum
    with pytest.raises(ValueError, match="no 'elements'.*by='type'"):
        SpeciesRDF(u.atoms)
    ag = u.select_atoms("name CA or name C or name O or name N or name CB or name SD or name NZ")
    s = SpeciesRDF(ag, by="name", norm="density", range=(0.0, 20.0), precision="double")
    s.run(stop=5)
    assert len(s.results.species) == 7
    exact = moved = 0
    for k, (a, b) in enumerate(s.results.pairs):
        ga, gb = s.groups[a], s.groups[b]
        ref = _mda(ga, gb, norm="density", range=(0.0, 20.0), _run=dict(stop=5))
        c, rc = s.results.count[k], ref.results.count
        pos = np.concatenate([ga.positions, gb.positions])
        size = pos.max(axis=0) - pos.min(axis=0)
        brute = len(ga) < 10 or len(gb) < 10 or np.any(20.0 > 0.3 * size)
        if brute:
            np.testing.assert_array_equal(c, rc, err_msg=str(s.results.pair_labels[k]))
        assert c.sum() == rc.sum()
        diff = int(np.abs(c - rc).sum())
        assert diff <= max(2, 1e-6 * rc.sum())
        exact += diff == 0
        moved += diff
    print(f"PSF/DCD: {exact} of 28 partials bit for bit, {moved} pair-bin moves")
    assert exact >= 20


def test_orthorhombic_small_species():
    """Orthorhombic box, a species of 6 atoms (MDAnalysis brute-forces its pairs with a
    float32 inverse box length): the grid partials are exact, the others within rounding."""
    rng = np.random.default_rng(11)
    dims = [28.0, 29.0, 30.0, 90.0, 90.0, 90.0]
    coords = np.stack([random_positions_in_box(rng, 600, dims)[0] for _ in range(3)])
    names = ["A"] * 300 + ["B"] * 200 + ["C"] * 94 + ["D"] * 6
    u = make_universe(coords, dims, names=names)
    s = SpeciesRDF(u.atoms, by="name", range=(0.0, 8.0), precision="double").run()
    assert s.results.species == ["A", "B", "C", "D"]
    for k, (a, b) in enumerate(s.results.pairs):
        ref = _mda(s.groups[a], s.groups[b], range=(0.0, 8.0))
        if "D" in s.results.pair_labels[k]:
            print(s.results.pair_labels[k], np.abs(s.results.count[k] - ref.results.count).sum())
            assert s.results.count[k].sum() == ref.results.count.sum()
            assert np.abs(s.results.count[k] - ref.results.count).sum() <= 2
        else:
            np.testing.assert_array_equal(s.results.count[k], ref.results.count)


def test_numpy_brute_force_triclinic():
    rng = np.random.default_rng(3)
    dims = [20.0, 21.0, 22.0, 75.0, 85.0, 100.0]
    coords = random_positions_in_box(rng, 150, dims)
    u = make_universe(coords, dims, names=["P"] * 100 + ["Q"] * 50)
    s = SpeciesRDF(u.atoms, by="name", nbins=40, range=(0.0, 9.0), precision="double").run()
    edges = reference_edges(40, (0.0, 9.0))
    p, q = u.atoms[:100].positions, u.atoms[100:].positions
    np.testing.assert_array_equal(s.partial("P", "P").count, brute_force_counts(p, p, dims, edges))
    np.testing.assert_array_equal(s.partial("Q", "P").count, brute_force_counts(p, q, dims, edges))
    np.testing.assert_array_equal(s.partial("Q", "Q").count, brute_force_counts(q, q, dims, edges))


def test_groupings_and_accessor():
    rng = np.random.default_rng(4)
    dims = [20.0, 20.0, 20.0, 90.0, 90.0, 90.0]
    coords = random_positions_in_box(rng, 120, dims)
    u = make_universe(coords, dims, atoms_per_residue=3,
                      names=["OW", "HW1", "HW2"] * 40)
    by_name = SpeciesRDF(u.atoms, by="name", precision="double").run()
    mapping = SpeciesRDF(u.atoms, by={"O": "name OW", "H": u.select_atoms("name HW*")},
                         precision="double").run()
    func = SpeciesRDF(u.atoms, by=lambda ag: np.where(ag.names == "OW", "O", "H"),
                      precision="double").run()
    groups = SpeciesRDF(u.atoms, by=[u.select_atoms("name OW"), u.select_atoms("name HW*")],
                        precision="double").run()
    assert mapping.results.species == ["H", "O"] == func.results.species
    assert groups.results.species == [1, 0]
    assert mapping.results.pair_labels == [("H", "H"), ("H", "O"), ("O", "O")]
    oh = mapping.partial("O", "H")
    ho = mapping.partial("h", "o")  # case-insensitive when unambiguous
    np.testing.assert_array_equal(oh.count, ho.count)
    np.testing.assert_array_equal(oh.count, func.partial("H", "O").count)
    np.testing.assert_array_equal(oh.count, groups.partial(0, 1).count)
    # coordination: b around a, cdf / N_a
    np.testing.assert_allclose(oh.coordination * 40, ho.coordination * 80)
    np.testing.assert_allclose(oh.coordination[-1], oh.count.sum() / 40)
    oo_name = by_name.partial("OW", "OW")
    np.testing.assert_array_equal(oo_name.count, mapping.partial("O", "O").count)
    assert by_name.partial("HW1", "HW2").n_pairs == 40 * 40
    with pytest.raises(KeyError, match="no species 'X'"):
        mapping.partial("X", "O")
    by_res = SpeciesRDF(u.atoms, by="resname").run()
    assert by_res.results.species == ["RES"]
    # overlapping species (mapping): no total
    ov = SpeciesRDF(u.atoms, by={"all": "all", "O": "name OW"}).run()
    assert "total_rdf" not in ov.results


@pytest.mark.parametrize("kw, exc, match", [
    (dict(by="colour"), ValueError, "by must be"),
    (dict(by=42), TypeError, "by must be"),
    (dict(by={"O": "name NOPE"}), ValueError, "species 'O' has no atoms"),
    (dict(by={"O": 3}), TypeError, "species 'O'"),
    (dict(by=lambda ag: [1, 2]), ValueError, "one label per atom"),
    (dict(norm="foo"), ValueError, "invalid norm"),
    (dict(nbins=1.5), TypeError, "nbins"),
    (dict(range=(-1, 3)), ValueError, "rmin"),
    (dict(exclude_same="molecule"), ValueError, "exclude_same"),
    (dict(exclude_self="yes"), TypeError, "exclude_self"),
    (dict(device="tpu"), ValueError, "device"),
    (dict(precision="half"), ValueError, "precision"),
])
def test_bad_input(kw, exc, match):
    u = make_universe(np.zeros((4, 3)), [10, 10, 10, 90, 90, 90], names=list("ABAB"))
    kw.setdefault("by", "name")
    with pytest.raises(exc, match=match):
        SpeciesRDF(u.atoms, **kw)


def test_bad_atomgroup_and_no_box():
    with pytest.raises(TypeError, match="atomgroup"):
        SpeciesRDF("all")
    u = make_universe(np.random.default_rng(1).uniform(0, 9, (20, 3)), None, names=["A"] * 20)
    with pytest.raises(ValueError, match="norm='rdf' needs the box"):
        SpeciesRDF(u.atoms, by="name").run()
    s = SpeciesRDF(u.atoms, by="name")
    with pytest.raises(RuntimeError, match="run"):
        s.partial("A", "A")


def test_single_precision_within_rounding(adk_subset):
    d = SpeciesRDF(adk_subset, precision="double").run(stop=1)
    f = SpeciesRDF(adk_subset).run(stop=1)
    np.testing.assert_array_equal(d.results.count.sum(axis=1), f.results.count.sum(axis=1))
    assert np.abs(d.results.count - f.results.count).sum() <= 1e-5 * d.results.count.sum()


def test_parallel_backends_identical(adk_subset):
    assert SpeciesRDF.get_supported_backends() == ("serial", "multiprocessing", "dask", "node")
    kw = dict(by="element", precision="double", nbins=40, range=(0.0, 8.0))
    ser = SpeciesRDF(adk_subset, **kw).run(stop=4)
    backends = ["multiprocessing"]
    try:
        import dask  # noqa: F401
        backends.append("dask")
    except ImportError:  # pragma: no cover
        pass
    for backend in backends:
        par = SpeciesRDF(adk_subset, **kw).run(stop=4, backend=backend, n_workers=2)
        np.testing.assert_array_equal(par.results.count_uint64, ser.results.count_uint64)
        np.testing.assert_array_equal(par.results.total_count, ser.results.total_count)
        np.testing.assert_allclose(par.results.rdf, ser.results.rdf, rtol=1e-12)
        assert par.results.species == ser.results.species
        assert par.n_frames == ser.n_frames == 4


def test_methods_give_identical_counts(adk_subset):
    """Cell lists and all pairs: the same partials, bit for bit (double and single)."""
    for precision in ("double", "single"):
        kw = dict(by="element", precision=precision, nbins=60, range=(0.0, 9.0))
        allp = SpeciesRDF(adk_subset, method="allpairs", **kw).run(stop=2)
        cells = SpeciesRDF(adk_subset, method="cells", **kw).run(stop=2)
        assert cells._engine.last_method == "cells"
        assert allp._engine.last_method == "allpairs"
        np.testing.assert_array_equal(cells.results.count_uint64, allp.results.count_uint64)
    with pytest.raises(ValueError, match="method"):
        SpeciesRDF(adk_subset, method="grid")
