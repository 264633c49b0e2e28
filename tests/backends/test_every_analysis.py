"""Every analysis of the package on every parallel backend it declares, against its serial
run (as MDAnalysis's ``params_for_cls`` runs each analysis class on its backends).

Integer results must be equal; float results equal to 1e-12 (the per-frame rows are
summed in frame order, so they are equal too, but a mean of parts may differ in the last
bit). New analyses are found through the registry: a class missing from ``CASES`` fails.
"""

import warnings

import numpy as np
import pytest

from conftest import make_universe

import mdakit_fastrdf
from mdakit_fastrdf.analysis.base import PairHistogramBase
from mdakit_fastrdf.analysis.declarations import analysis_classes

N_FRAMES, N_ATOMS, BOX = 12, 240, 24.0


@pytest.fixture(scope="module")
def walkers():
    """In memory: 240 atoms (names O, H, H per residue of 3) taking small random steps for 12
    frames in a constant orthorhombic box; elements set."""
    rng = np.random.default_rng(23)
    start = rng.uniform(0.0, BOX, size=(N_ATOMS, 3))
    coords = start + np.cumsum(rng.normal(scale=0.25, size=(N_FRAMES, N_ATOMS, 3)), axis=0)
    names = np.array(["O", "H", "H"] * (N_ATOMS // 3))
    u = make_universe(coords, np.array([BOX, BOX, BOX, 90.0, 90.0, 90.0]),
                      atoms_per_residue=3, names=names)
    u.add_TopologyAttr("elements", names)
    return u


def _oxygens(u):
    return u.select_atoms("name O")


CASES = {
    "InterRDF": lambda u: mdakit_fastrdf.InterRDF(_oxygens(u), u.atoms, nbins=30,
                                                  range=(0.0, 8.0)),
    "InterRDF_s": lambda u: mdakit_fastrdf.InterRDF_s(
        u, [[u.atoms[:6], u.atoms[6:30]], [u.atoms[30:33], u.atoms[30:33]]], nbins=20,
        range=(0.0, 8.0)),
    "LateralRDF": lambda u: mdakit_fastrdf.LateralRDF(_oxygens(u), _oxygens(u), nbins=20,
                                                      range=(0.0, 8.0), slab=3.0),
    "CylindricalRDF": lambda u: mdakit_fastrdf.CylindricalRDF(u.atoms, nbins=20,
                                                              range=(0.0, 10.0)),
    "SpeciesRDF": lambda u: mdakit_fastrdf.SpeciesRDF(u.atoms, by="name", nbins=20,
                                                      range=(0.0, 8.0)),
    "KirkwoodBuff": lambda u: mdakit_fastrdf.KirkwoodBuff(u.atoms, by="name", nbins=40,
                                                          range=(0.0, 11.0)),
    "StructureFactor": lambda u: mdakit_fastrdf.StructureFactor(
        u.atoms, nbins=200, range=(0.0, 11.0), qbins=20, q_range=(0.5, 4.0)),
    "DebyeScattering": lambda u: mdakit_fastrdf.DebyeScattering(
        u.atoms, q=[0.2, 0.5, 1.0], ignore_box=True),
    "IntermediateScattering": lambda u: mdakit_fastrdf.IntermediateScattering(
        u.atoms, q=[0.6, 1.2], lags=4, by="name"),
    "DynamicStructureFactor": lambda u: mdakit_fastrdf.DynamicStructureFactor(
        u.atoms, q=[0.6, 1.2], lags=4, by="name"),
    "VanHove": lambda u: mdakit_fastrdf.VanHove(_oxygens(u), lags=[0, 1, 3], nbins=20,
                                                range=(0.0, 8.0)),
}


def _backends():
    out = [pytest.param(("multiprocessing", {"n_workers": 2}), id="multiprocessing"),
           pytest.param(("node", {"n_workers": 2}), id="node")]
    try:
        import dask  # noqa: F401
    except ImportError:
        return out
    return out + [pytest.param(("dask", {"n_workers": 2}), id="dask")]


@pytest.fixture(params=_backends())
def backend(request):
    """A parallel backend and its run() keywords."""
    return request.param


def test_every_registered_analysis_has_a_case():
    """A new analysis class joins the table (the registry is the list of analyses)."""
    public = {name for name in mdakit_fastrdf.__all__
              if isinstance(getattr(mdakit_fastrdf, name), type)
              and issubclass(getattr(mdakit_fastrdf, name), PairHistogramBase)}
    assert public == set(CASES)
    assert public <= set(analysis_classes())


def _same(x, y, key):
    if isinstance(x, dict):
        assert x.keys() == y.keys(), key
        for k in x:
            _same(x[k], y[k], f"{key}.{k}")
    elif isinstance(x, (list, tuple)) and not np.isscalar(x):
        assert len(x) == len(y), key
        for a, b in zip(x, y):
            _same(a, b, key)
    elif isinstance(x, (np.ndarray, np.generic, int, float)) and not isinstance(x, bool):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype.kind in "iub":
            np.testing.assert_array_equal(x, y, err_msg=key)
        elif x.dtype.kind in "fc":
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-300, err_msg=key)
    else:
        assert x == y, key


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_analysis_on_backend_equals_serial(walkers, name, backend):
    kind, options = backend
    if kind not in CASES[name](walkers).get_supported_backends():
        pytest.skip(f"{name} does not take backend={kind!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (half-box, few-frame and deprecation warnings)
        serial = CASES[name](walkers).run()
        parallel = CASES[name](walkers).run(backend=kind, **options)
    assert any(np.any(v) for v in serial.results.values() if isinstance(v, np.ndarray))
    assert serial.results.keys() == parallel.results.keys()
    for key in serial.results:
        _same(serial.results[key], parallel.results[key], key)
    np.testing.assert_array_equal(serial.frames, parallel.frames)
