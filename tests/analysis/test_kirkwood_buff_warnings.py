"""Warnings of a poor Kirkwood-Buff fit and of too few blocks (issue 38, item 4).

The references are independent of the code under test: the running integral of a
piecewise-constant h(r) with the finite-sphere (Kruger) weight is integrated in closed form
here, shell by shell, and the R^2 of the line L G(L) is numpy.corrcoef squared.
"""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import make_universe, random_positions_in_box

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.analysis.kirkwood_buff import KirkwoodBuff, kirkwood_buff

RMAX, NBINS = 60.0, 600
EDGES = np.linspace(0.0, RMAX, NBINS + 1)
CENTRES = 0.5 * (EDGES[1:] + EDGES[:-1])


def _kruger_running(L, pieces):
    r"""G(L) = sum over pieces (a, b, c) of c 4 pi \int_a^min(b, L) r^2 (1 - 3r/2L + r^3/2L^3) dr,
    in closed form (h = c on [a, b), 0 elsewhere)."""
    G = np.zeros_like(L)
    for a, b, c in pieces:
        hi = np.minimum(b, L)
        ok = hi > a

        def prim(r):
            return r**3 / 3 - 3 * r**4 / (8 * L) + r**6 / (12 * L**3)

        G += np.where(ok, c * 4 * np.pi * (prim(np.maximum(hi, a)) - prim(a)), 0.0)
    return G


def _r2(L, G, lo, hi):
    m = (L >= lo - 1e-9) & (L <= hi + 1e-9)
    x = L[m]
    return np.corrcoef(x, x * G[m])[0, 1] ** 2


def _rdf(pieces):
    g = np.ones(NBINS)
    for a, b, c in pieces:
        g[(CENTRES >= a) & (CENTRES < b)] += c
    return g


# a hard core: L G(L) = G L + F - c / L^2 beyond the core, a straight line to R^2 ~ 1
CORE = [(0.0, 3.0, -1.0)]
# a hard core and a long-wavelength oscillation of h = +-0.01 (7.5 Å steps) out to r_max:
# L G(L) bends in every window, the case of an RDF that has not converged
BENT = [(0.0, 3.0, -1.0)] + [(a, a + 7.5, 0.01 * (-1) ** k)
                             for k, a in enumerate(np.arange(10.0, 60.0, 7.5))]
L = EDGES[1:]  # 'histogram' integration: L runs over the upper edges


def test_reference_r2_of_the_two_cases():
    """The independent references: the core fits to R^2 > 0.999, the bent case below 0.99
    in every window 'auto' may choose (at least 10 Å wide, ending in the last 10 %)."""
    assert _r2(L, _kruger_running(L, CORE), 30.0, 60.0) > 0.999
    G = _kruger_running(L, BENT)
    assert _r2(L, G, 30.0, 60.0) < 0.9
    best = max(_r2(L, G, lo, hi) for lo in np.arange(10.0, 45.01, 0.5)
               for hi in np.arange(55.0, 60.01, 0.5))
    assert best < 0.98


@pytest.mark.parametrize("route", [None, (30.0, 60.0), "auto"])
def test_every_fit_route_warns_below_the_threshold(route):
    with pytest.warns(RuntimeWarning, match=r"R\^2") as record:
        res = kirkwood_buff(EDGES, _rdf(BENT), correction="none", fit_range=route)
    hits = [w for w in record if "R^2" in str(w.message)]
    assert len(hits) == 1, [str(w.message) for w in record]  # one warning, not one per step
    text = str(hits[0].message)
    assert "0.99" in text
    assert hits[0].filename == __file__  # points at the caller's line
    lo, hi = res.fit_range
    ref = _r2(L, _kruger_running(L, BENT), lo, hi)
    assert res.r2 == pytest.approx(ref, abs=1e-3)
    assert f"{ref:.3f}" in text
    if route != "auto":
        assert (lo, hi) == (30.0, 60.0)
    assert re.search(r"fit_range", text)


@pytest.mark.parametrize("route", [None, (30.0, 60.0), "auto"])
def test_a_good_fit_does_not_warn(route):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = kirkwood_buff(EDGES, _rdf(CORE), correction="none", fit_range=route)
    assert res.r2 > 0.999


def test_threshold_is_an_option_and_none_silences_it():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kirkwood_buff(EDGES, _rdf(BENT), correction="none", r2_threshold=None)
        kirkwood_buff(EDGES, _rdf(BENT), correction="none", r2_threshold=0.5)
    with pytest.warns(RuntimeWarning, match=r"R\^2"):
        kirkwood_buff(EDGES, _rdf(CORE), correction="none", r2_threshold=1.0 + 1e-12)


def test_adk_water_default_fit_warns(adk_water):
    """The issue's example: the default window gives R^2 = 0.94 and must say so, once,
    at the user's line, together with the blocks warning."""
    ow = adk_water.select_atoms("name OW")
    kb = KirkwoodBuff(ow, by={"water": "name OW"}, nbins=150, range=(0, 15), temperature=300)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        kb.run(stop=4, blocks=2)
    fit = [w for w in record if "R^2" in str(w.message)]
    assert len(fit) == 1, [str(w.message) for w in record]  # not once per block
    r2 = float(kb.results.kb_r2[0])
    assert r2 < 0.99
    text = str(fit[0].message)
    assert f"{r2:.3f}" in text and "water-water" in text
    assert fit[0].filename == __file__
    few = [w for w in record if "blocks=2" in str(w.message)]
    assert len(few) == 1 and few[0].filename == __file__
    # docs/kirkwood_buff.rst shows this run's output: the numbers it prints are this run's
    doc = (Path(__file__).parents[2] / "docs" / "kirkwood_buff.rst").read_text()
    shown = re.search(r"\(array\(\[([\d.]+)\]\), array\(\[([\d.]+)\]\), "
                      r"array\(\[([\d.]+)\]\)", doc)
    assert shown, "the adk water example's output is missing from the docs"
    got = [kb.results.kb[0], kb.results.kb_sem[0], r2]
    np.testing.assert_allclose([float(v) for v in shown.groups()], got, rtol=1e-6)
    assert f"R^2 = {r2:.3f} over the default window" in " ".join(doc.split())


def test_adk_water_auto_warns_once(adk_water):
    ow = adk_water.select_atoms("name OW")
    kb = KirkwoodBuff(ow, by={"water": "name OW"}, nbins=150, range=(0, 15), fit_range="auto")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        kb.run(stop=4)
    fit = [w for w in record if "R^2" in str(w.message)]
    assert len(fit) == 1, [str(w.message) for w in record]
    assert fit[0].filename == __file__


@pytest.fixture
def gas(rng):
    dims = np.array([20.0, 20.0, 20.0, 90.0, 90.0, 90.0])
    return make_universe(random_positions_in_box(rng, 40, dims, n_frames=8), dims)


@pytest.mark.parametrize("blocks", [2, 3])
def test_fewer_than_four_blocks_warn(gas, blocks):
    with pytest.warns(UserWarning, match=rf"blocks={blocks}.*at least 4") as record:
        InterRDF(gas.atoms, gas.atoms, nbins=10, range=(0.0, 8.0)).run(blocks=blocks)
    hits = [w for w in record if f"blocks={blocks}" in str(w.message)]
    assert len(hits) == 1 and hits[0].filename == __file__


def test_four_blocks_do_not_warn(gas):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rdf = InterRDF(gas.atoms, gas.atoms, nbins=10, range=(0.0, 8.0)).run(blocks=4)
    assert rdf.results.block_rdf.shape[0] == 4
