"""Issue 26, item 4 and the extras: ``results.rho``, ``normalization_mode='finite_size'``,
InterRDF's ``cdf`` / ``coordination`` / ``get_cdf()`` / ``first_shell()`` and the warning
when ``range`` passes half the smallest box width.

References: densities from the trajectory's box vectors (NumPy, conftest's ``box_matrix``),
freud's ``density.RDF`` (both normalisation modes, ``n_r``), MDAnalysis's InterRDF counts,
and NumPy searches of MDAnalysis's g(r); never this package.
"""

import warnings

import numpy as np
import pytest
from conftest import (
    box_matrix,
    box_widths,
    make_universe,
    random_positions_in_box,
)
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF

from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF, load
from mdakit_fastrdf.analysis.rdf import first_shell

freud = pytest.importorskip("freud")


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _mean_volume(u, frames=None):
    """<V> of the frames from the box vectors, float64 (not from MDAnalysis's ts.volume)."""
    vols = []
    for ts in (u.trajectory if frames is None else u.trajectory[frames]):
        vols.append(abs(np.linalg.det(box_matrix(ts.dimensions))))
    return np.mean(vols), np.array(vols)


@pytest.fixture(scope="module")
def gas():
    """A small ideal gas (finite-size effects of 1/N = 2.5 %) in a fixed cubic box, 6
    frames, two kinds of atoms (names A, B)."""
    rng = np.random.default_rng(26)
    dims = np.array([20.0, 20.0, 20.0, 90, 90, 90])
    coords = random_positions_in_box(rng, 40, dims, n_frames=6)
    return make_universe(coords, dims, names=["A"] * 24 + ["B"] * 16)


@pytest.fixture(scope="module")
def npt_gas():
    """A gas whose orthorhombic box changes every frame (as in NPT): 8 frames."""
    rng = np.random.default_rng(262)
    n_frames, n = 8, 60
    dims = np.array([[18.0 + 0.7 * f, 19.0 - 0.3 * f, 20.0 + 0.2 * f, 90, 90, 90]
                     for f in range(n_frames)])
    coords = np.stack([random_positions_in_box(rng, n, dims[f])[0] for f in range(n_frames)])
    return make_universe(coords, dims, names=["A"] * 35 + ["B"] * 25)


# -- results.rho ----------------------------------------------------------------------
@pytest.mark.parametrize("norm", ["rdf", "density", "none"])
def test_rho_interrdf_is_n_over_mean_volume(adk_water, norm):
    ow, hw = adk_water.select_atoms("name OW"), adk_water.select_atoms("name HW1 HW2")
    r = InterRDF(ow, hw, nbins=20, range=(0.0, 6.0), norm=norm).run(step=3)
    mean_v, _ = _mean_volume(adk_water, slice(None, None, 3))
    assert r.results.rho.shape == (2,)
    np.testing.assert_allclose(r.results.rho, [len(ow) / mean_v, len(hw) / mean_v],
                               rtol=1e-6)


def test_rho_converts_between_norms(npt_gas):
    """norm='density' = norm='rdf' x N_pairs / <V> = N_A rho_B g (no exclusions)."""
    a, b = npt_gas.select_atoms("name A"), npt_gas.select_atoms("name B")
    g = InterRDF(a, b, nbins=30, range=(0.0, 8.0)).run()
    d = InterRDF(a, b, nbins=30, range=(0.0, 8.0), norm="density").run()
    np.testing.assert_allclose(d.results.rdf, g.results.rdf * len(a) * g.results.rho[1],
                               rtol=1e-12)
    np.testing.assert_allclose(d.results.rho, g.results.rho, rtol=1e-15)


def test_rho_species_and_sites(npt_gas):
    mean_v, _ = _mean_volume(npt_gas)
    s = SpeciesRDF(npt_gas.atoms, by="name", nbins=10, range=(0.0, 8.0),
                   norm="none").run()
    sizes = [len(npt_gas.select_atoms(f"name {x}")) for x in s.results.species]
    np.testing.assert_allclose(s.results.rho, np.array(sizes) / mean_v, rtol=1e-6)
    a, b = npt_gas.atoms[:3], npt_gas.atoms[10:15]
    rs = _quiet(InterRDF_s, npt_gas, [[a, b], [b, b]], nbins=10, range=(0.0, 8.0)).run()
    np.testing.assert_allclose(rs.results.rho, np.array([[3, 5], [5, 5]]) / mean_v,
                               rtol=1e-6)


def test_rho_block_sem_from_the_blocks_volumes(npt_gas):
    a = npt_gas.select_atoms("name A")
    r = InterRDF(a, a, nbins=10, range=(0.0, 8.0), norm="density").run(blocks=4)
    _, vols = _mean_volume(npt_gas)
    per_block = np.array([len(a) / v.mean() for v in np.array_split(vols, 4)])
    np.testing.assert_allclose(r.results.block_rho[:, 0], per_block, rtol=1e-6)
    sem = per_block.std(ddof=1) / np.sqrt(4)
    np.testing.assert_allclose(r.results.rho_sem[0], sem, rtol=1e-4)
    assert sem > 0


def test_no_rho_without_a_box(rng):
    coords = rng.random((2, 30, 3)).astype(np.float32) * 10
    u = make_universe(coords, None)
    r = InterRDF(u.atoms, u.atoms, nbins=5, range=(0.0, 5.0), norm="density").run()
    assert "rho" not in r.results
    assert np.isnan(r.results.box_volume_cum)
    # one frame without a box in a boxed trajectory: no density either
    dims = np.array([[10.0, 10, 10, 90, 90, 90], [0, 0, 0, 90, 90, 90]])
    u = make_universe(coords, dims)
    r = InterRDF(u.atoms, u.atoms, nbins=5, range=(0.0, 4.0), norm="density").run()
    assert "rho" not in r.results


# -- finite_size against freud ----------------------------------------------------------
def _freud_rdf(u, atoms, nbins, rmax, mode):
    """freud's RDF of `atoms` with themselves over every frame (self pairs counted,
    exclude_ii=False, as InterRDF(g, g) counts them)."""
    rdf = freud.density.RDF(bins=nbins, r_max=rmax, normalization_mode=mode)
    for ts in u.trajectory:
        box = freud.box.Box.from_matrix(box_matrix(ts.dimensions).T)
        rdf.compute((box, atoms.positions), neighbors={"r_max": rmax, "exclude_ii": False},
                    reset=False)
    return rdf


@pytest.mark.parametrize("mode", ["exact", "finite_size"])
def test_finite_size_interrdf_equals_freud(gas, mode):
    """Same bins (freud's edges are float32 linspace(0, rmax), numpy's float64; a pair
    closer than float32 rounding to an edge could fall differently, none does here, and
    freud drops r = rmax where the numpy bin keeps it, measure zero for random points)."""
    nbins, rmax = 25, 9.5
    ref = _freud_rdf(gas, gas.atoms, nbins, rmax, mode)
    r = InterRDF(gas.atoms, gas.atoms, nbins=nbins, range=(0.0, rmax),
                 normalization_mode=mode).run()
    np.testing.assert_allclose(r.results.edges, ref.bin_edges, rtol=1e-6)
    np.testing.assert_array_equal(r.results.count, ref.bin_counts)
    np.testing.assert_allclose(r.results.rdf, ref.rdf, rtol=2e-5)
    n = len(gas.atoms)
    assert r.results.n_pairs == (n * (n - 1) if mode == "finite_size" else n * n)


def test_finite_size_species_equals_freud_per_species_and_total(gas):
    nbins, rmax = 20, 9.0
    s = SpeciesRDF(gas.atoms, by="name", nbins=nbins, range=(0.0, rmax),
                   normalization_mode="finite_size").run()
    exact = SpeciesRDF(gas.atoms, by="name", nbins=nbins, range=(0.0, rmax)).run()
    for k, (a, b) in enumerate(s.results.pairs):
        ga = gas.select_atoms(f"name {s.results.species[a]}")
        if a == b:
            ref = _freud_rdf(gas, ga, nbins, rmax, "finite_size")
            np.testing.assert_allclose(s.results.rdf[k], ref.rdf, rtol=2e-5)
        else:  # disjoint species: unchanged
            np.testing.assert_array_equal(s.results.rdf[k], exact.results.rdf[k])
    ref = _freud_rdf(gas, gas.atoms, nbins, rmax, "finite_size")
    np.testing.assert_allclose(s.results.total_rdf, ref.rdf, rtol=2e-5)


def test_finite_size_one_atom_species_is_nan(gas):
    s = SpeciesRDF(gas.atoms, by={"one": gas.atoms[:1], "rest": gas.atoms[1:]}, nbins=5,
                   range=(0.0, 8.0), normalization_mode="finite_size").run()
    k = next(k for k, (a, b) in enumerate(s.results.pairs)
             if a == b and s.results.species[a] == "one")
    assert np.all(np.isnan(s.results.rdf[k]))
    assert np.all(np.isfinite(np.delete(s.results.rdf, k, axis=0)))


# -- cdf, coordination, first shell --------------------------------------------------
def test_cdf_and_coordination_against_mdanalysis_counts(adk_water):
    ow, hw = adk_water.select_atoms("name OW"), adk_water.select_atoms("name HW1 HW2")
    ref = _quiet(MDAInterRDF(ow, hw, nbins=40, range=(0.0, 5.0)).run, stop=2)
    r = InterRDF(ow, hw, nbins=40, range=(0.0, 5.0)).run(stop=2)
    n_frames = 2
    cdf = np.cumsum(ref.results.count) / n_frames
    np.testing.assert_allclose(r.results.cdf, cdf, rtol=1e-12)
    np.testing.assert_allclose(r.results.coordination, cdf / len(ow), rtol=1e-12)
    assert r.get_cdf() is r.results.cdf
    # every key of MDAnalysis's results is there too (new keys are additions)
    assert set(ref.results) <= set(r.results)


def test_coordination_equals_freud_n_r(gas):
    """One frame: freud's n_r (points within the upper edge around a query point)."""
    a, b = gas.select_atoms("name A"), gas.select_atoms("name B")
    ts = gas.trajectory[0]
    rdf = freud.density.RDF(bins=15, r_max=9.0)
    box = freud.box.Box.from_matrix(box_matrix(ts.dimensions).T)
    rdf.compute((box, b.positions), query_points=a.positions)
    r = InterRDF(a, b, nbins=15, range=(0.0, 9.0)).run(stop=1)
    np.testing.assert_allclose(r.results.coordination, rdf.n_r, rtol=1e-6)


def test_get_cdf_before_run(gas):
    with pytest.raises(RuntimeError, match="run"):
        InterRDF(gas.atoms, gas.atoms).get_cdf()


def test_first_shell_of_adk_water_against_numpy(adk_water):
    """The water O-O first minimum and coordination number from MDAnalysis's g(r),
    searched with NumPy between the first peak (below 4 Å) and the second (4-6 Å)."""
    ow = adk_water.select_atoms("name OW")
    kw = {"nbins": 40, "range": (0.0, 8.0), "exclusion_block": (1, 1)}
    ref = _quiet(MDAInterRDF(ow, ow, **kw).run, stop=3)
    bins, g = ref.results.bins, ref.results.rdf
    p1 = int(np.argmax(np.where(bins < 4.0, g, -np.inf)))
    p2 = int(np.argmax(np.where((bins > 4.0) & (bins < 6.0), g, -np.inf)))
    m = p1 + int(np.argmin(g[p1:p2 + 1]))
    cum = np.cumsum(ref.results.count) / (ref.n_frames * len(ow))
    n_ref = 0.5 * (cum[m - 1] + cum[m])

    shell = InterRDF(ow, ow, **kw).run(stop=3).first_shell()
    assert shell.index == m and shell.r_min == pytest.approx(bins[m])
    assert shell.r_peak == pytest.approx(bins[p1])
    assert shell.coordination == pytest.approx(n_ref, rel=1e-12)
    # water: first minimum near 3.3-3.5 Å with about 4.3-4.7 neighbours within 3.3 Å (e.g.
    # Soper, ISRN Phys. Chem. 2013, 279463); the minimum is shallow, so 3 frames and 0.2 Å
    # bins place it anywhere in 3.2-3.6 Å, where the count grows by about 1
    assert 3.2 < shell.r_min < 3.6 and 4.0 < shell.coordination < 5.5


def test_first_shell_ignores_noise_below_prominence():
    """A smooth g(r) with known extrema plus noise: the minimum found is the true one."""
    rng = np.random.default_rng(5)
    bins = np.arange(0.025, 10.0, 0.05)
    g = np.where(bins < 2.5, 0.0, 1 + 1.5 * np.exp(-(bins - 3.0) ** 2 / 0.08)
                 - 0.35 * np.exp(-(bins - 3.9) ** 2 / 0.15)
                 + 0.3 * np.exp(-(bins - 4.9) ** 2 / 0.2))
    true_min = bins[np.argmin(np.where((bins > 3.2) & (bins < 4.6), g, np.inf))]
    noisy = g + np.where(bins < 2.5, 0.0, rng.normal(0, 0.01, bins.size))
    coordination = np.cumsum(g)  # any increasing curve
    shell = first_shell(bins, noisy, coordination, prominence=0.1)
    assert abs(shell.r_min - true_min) <= 0.1
    assert shell.r_peak == pytest.approx(3.0, abs=0.05)


def test_first_shell_skips_the_self_pairs_at_zero():
    """A group with itself without exclusion: bin 0 holds the self pairs (g >> 1); the
    first peak is where g rises through 1, not bin 0."""
    bins = np.arange(0.05, 6.0, 0.1)
    g = np.where(bins < 2.4, 0.0, 1 + 1.2 * np.exp(-(bins - 2.85) ** 2 / 0.05)
                 - 0.3 * np.exp(-(bins - 3.5) ** 2 / 0.1))
    g[0] = 500.0
    shell = first_shell(bins, g, np.arange(bins.size, dtype=float))
    assert shell.r_peak == pytest.approx(2.85) and 3.3 < shell.r_min < 3.7


def test_cli_prints_density_and_first_shell(adk_water, tmp_path, capsys):
    from mdakit_fastrdf.cli import main

    out = tmp_path / "rdf.npz"
    assert main(["--stop", "2", "--range", "0", "8", "--nbins", "40", "--no-progress",
                 "--finite-size", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    ow = adk_water.select_atoms("name OW")
    mean_v, _ = _mean_volume(adk_water, slice(0, 2))
    rho = float(text.split("ρ1 = ")[1].split()[0])
    assert rho == pytest.approx(len(ow) / mean_v, rel=1e-5)
    assert "First shell: minimum at r = " in text and "itself included" in text
    data = load(out)
    assert data.parameters["normalization_mode"] == "finite_size"
    n = len(ow)
    assert data.results.n_pairs == n * (n - 1)
    assert main(["--stop", "1", "--finite-size", "-s2", "name HW1", "-o", str(out)]) == 1
    assert "--finite-size" in capsys.readouterr().err


def test_first_shell_errors(gas, adk_water):
    bins = np.linspace(0.1, 5, 50)
    with pytest.raises(ValueError, match="no first peak"):
        first_shell(bins, np.full(50, 0.5), np.arange(50.0))
    rising = np.concatenate([np.zeros(10), np.linspace(1.5, 3, 40)])
    with pytest.raises(ValueError, match="no first peak"):
        first_shell(bins, rising, np.arange(50.0))
    falling = np.concatenate([np.zeros(10), np.linspace(3, 0.5, 40)])
    with pytest.raises(ValueError, match="no first minimum"):
        first_shell(bins, falling, np.arange(50.0))
    with pytest.raises(ValueError, match="shapes"):
        first_shell(bins, np.ones(49), np.arange(50.0))
    with pytest.raises(ValueError, match="equally spaced"):
        first_shell(bins ** 2, np.ones(50), np.arange(50.0))
    with pytest.raises(ValueError, match="prominence"):
        first_shell(bins, np.ones(50), np.arange(50.0), prominence=0)
    with pytest.raises(ValueError, match="smooth"):
        first_shell(bins, np.ones(50), np.arange(50.0), smooth=-1)
    ow = adk_water.select_atoms("name OW")
    short = InterRDF(ow, ow, nbins=15, range=(0.0, 3.0), exclusion_block=(1, 1)).run(stop=1)
    with pytest.raises(ValueError, match="no first minimum"):
        short.first_shell()
    dens = InterRDF(ow, ow, nbins=15, range=(0.0, 3.0), norm="density").run(stop=1)
    with pytest.raises(ValueError, match="norm='rdf'"):
        dens.first_shell()


# -- the half-width warning ------------------------------------------------------------
def _half_width_warnings(record):
    return [w for w in record if issubclass(w.category, UserWarning)
            and "half the smallest box width" in str(w.message)]


def test_half_width_warning_once_naming_the_width(npt_gas):
    widths = np.min([box_widths(ts.dimensions) for ts in npt_gas.trajectory], axis=0)
    half = widths.min() / 2
    axis = "abc"[int(np.argmin(widths))]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        InterRDF(npt_gas.atoms, npt_gas.atoms, nbins=10, range=(0.0, half + 0.5)).run()
    hits = _half_width_warnings(record)
    assert len(hits) == 1
    text = str(hits[0].message)
    assert f"{half:.6g} Å" in text and f"length along {axis}" in text
    assert hits[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        InterRDF(npt_gas.atoms, npt_gas.atoms, nbins=10, range=(0.0, half - 0.01)).run()


def test_half_width_warning_triclinic_names_perpendicular_width(rng):
    dims = np.array([30.0, 30.0, 30.0, 60.0, 60.0, 90.0])
    coords = random_positions_in_box(rng, 50, dims, n_frames=2)
    u = make_universe(coords, dims)
    w = box_widths(dims)
    assert w.min() < 30.0  # the perpendicular width, not a box length
    with pytest.warns(UserWarning, match="half the smallest box width") as record:
        SpeciesRDF(u.atoms, by=[u.atoms], nbins=10, range=(0.0, w.min() / 2 + 0.2)).run()
    text = str(_half_width_warnings(record)[0].message)
    assert f"{w.min() / 2:.6g} Å" in text and "width along" in text
    assert "true minimum image" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SpeciesRDF(u.atoms, by=[u.atoms], nbins=10, range=(0.0, w.min() / 2 - 0.2)).run()


def test_half_width_warning_once_with_parallel_backend(npt_gas):
    half = np.min([box_widths(ts.dimensions) for ts in npt_gas.trajectory]) / 2
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        InterRDF(npt_gas.atoms, npt_gas.atoms, nbins=10, range=(0.0, half + 1)).run(
            backend="multiprocessing", n_workers=2)
    assert len(_half_width_warnings(record)) == 1


# -- backends, save/load ---------------------------------------------------------------
FIELDS = ("rho", "cdf", "coordination", "box_volume_cum", "min_box_widths", "rho_sem",
          "cdf_sem", "coordination_sem", "block_rho")


@pytest.mark.parametrize("backend", ["multiprocessing", "dask", "node"])
def test_backends_identical(npt_gas, backend):
    if backend == "dask":
        pytest.importorskip("dask")
    a, b = npt_gas.select_atoms("name A"), npt_gas.select_atoms("name B")
    kw = {"nbins": 12, "range": (0.0, 8.0), "normalization_mode": "exact"}
    ser = InterRDF(a, b, **kw).run(blocks=3)
    par = InterRDF(a, b, **kw).run(blocks=3, backend=backend, n_workers=2)
    for name in FIELDS:
        np.testing.assert_array_equal(par.results[name], ser.results[name], err_msg=name)
    kw = {"by": "name", "nbins": 8, "range": (0.0, 8.0), "normalization_mode": "finite_size"}
    ser = SpeciesRDF(npt_gas.atoms, **kw).run(blocks=2).results
    par = SpeciesRDF(npt_gas.atoms, **kw).run(blocks=2, backend=backend, n_workers=2).results
    for name in ("rho", "rdf", "total_rdf", "rho_sem", "min_box_widths"):
        np.testing.assert_array_equal(par[name], ser[name], err_msg=name)


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".h5"])
def test_save_load_round_trip(npt_gas, tmp_path, suffix):
    if suffix == ".h5":
        pytest.importorskip("h5py")
    a = npt_gas.select_atoms("name A")
    r = InterRDF(a, a, nbins=12, range=(0.0, 8.0), normalization_mode="finite_size").run(
        blocks=2)
    data = load(r.save(tmp_path / f"rdf{suffix}"))
    assert data.parameters["normalization_mode"] == "finite_size"
    for name in FIELDS + ("n_pairs", "rdf", "count"):
        np.testing.assert_array_equal(np.asarray(data.results[name]), np.asarray(r.results[name]),
                                      err_msg=name)
    s = SpeciesRDF(npt_gas.atoms, by="name", nbins=6, range=(0.0, 8.0)).run()
    back = load(s.save(tmp_path / f"species{suffix}"))
    np.testing.assert_array_equal(back.results.rho, s.results.rho)
    rs = _quiet(InterRDF_s, npt_gas, [[a[:2], a[2:4]]], nbins=6, range=(0.0, 8.0)).run()
    back = load(rs.save(tmp_path / f"sites{suffix}"))
    np.testing.assert_array_equal(back.results.rho, rs.results.rho)


def test_csv_has_cdf_and_coordination_columns(npt_gas, tmp_path):
    a = npt_gas.select_atoms("name A")
    r = InterRDF(a, a, nbins=12, range=(0.0, 8.0)).run()
    path = r.save(tmp_path / "rdf.csv")
    table = np.genfromtxt(path, delimiter=",", names=True, skip_header=2)
    np.testing.assert_array_equal(table["cdf"], r.results.cdf)
    np.testing.assert_array_equal(table["coordination"], r.results.coordination)


# -- bad input ----------------------------------------------------------------------------
def test_bad_normalization_mode(gas):
    a, b = gas.select_atoms("name A"), gas.select_atoms("name B")
    with pytest.raises(ValueError, match="'exact' or 'finite_size'"):
        InterRDF(a, a, normalization_mode="finite")
    with pytest.raises(TypeError, match="normalization_mode"):
        InterRDF(a, a, normalization_mode=1)
    with pytest.raises(ValueError, match="norm='rdf'"):
        InterRDF(a, a, norm="density", normalization_mode="finite_size")
    with pytest.raises(ValueError, match="different atoms"):
        InterRDF(a, b, normalization_mode="finite_size")
    with pytest.raises(ValueError, match="exclusion_block"):
        InterRDF(a, a, exclusion_block=(1, 1), normalization_mode="finite_size")
    with pytest.raises(ValueError, match="at least 2 atoms"):
        InterRDF(a[:1], a[:1], normalization_mode="finite_size")
    with pytest.raises(ValueError, match="InterRDF_s"):
        _quiet(InterRDF_s, gas, [[a, b]], normalization_mode="finite_size")
    with pytest.raises(ValueError, match="exclude_self"):
        SpeciesRDF(gas.atoms, by="name", exclude_self=True, normalization_mode="finite_size")
    with pytest.raises(ValueError, match="disjoint"):
        SpeciesRDF(gas.atoms, by=[a, gas.atoms], normalization_mode="finite_size")
    with pytest.raises(TypeError, match="positional"):
        InterRDF(a, a, 75, (0.0, 15.0), "rdf", None, None, "serial", "finite_size")


# -- the docs page --------------------------------------------------------------------
def test_normalisation_page_code_runs(tmp_path, monkeypatch):
    """docs/normalisation.rst: its Python blocks run in order (few frames, as
    tests/outputs/test_docs.py runs the pages it lists)."""
    from pathlib import Path

    from test_docs import code_blocks, few_frames

    page = Path(__file__).resolve().parents[2] / "docs" / "normalisation.rst"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    blocks = [b for b in code_blocks(page.read_text(encoding="utf-8"), page.name)
              if b.language == "python"]
    assert len(blocks) == 4 and not any(b.marker for b in blocks)
    for block in blocks:
        exec(compile(few_frames(block.code), str(page), "exec"), namespace)  # noqa: S102 - the page's code
    rdf = namespace["rdf"]
    d = _quiet(InterRDF(rdf.g1, rdf.g2, nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1),
                        norm="density").run, stop=rdf.n_frames)
    np.testing.assert_allclose(namespace["density"], d.results.rdf, rtol=1e-12)
    assert namespace["same"] == namespace["shell"]
    sizes = namespace["near"].results.frame_group_sizes  # the updating selection's block
    assert sizes.shape == (namespace["near"].n_frames, 3) and len(set(sizes[:, 0])) > 1
