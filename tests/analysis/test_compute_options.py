"""ComputeOptions: one bundle for device, precision, n_threads and method, taken by every
analysis beside the four keywords, with the same results and clear errors."""

import numpy as np
import pytest

from mdakit_fastrdf import InterRDF, InterRDF_s, IntermediateScattering, SpeciesRDF, VanHove
from mdakit_fastrdf.analysis.compute import ComputeOptions


def test_bundle_equals_keywords(adk_water):
    """compute=ComputeOptions(...) counts what the same keywords count (InterRDF and a
    species analysis), and the analysis reports the options it was given."""
    ow = adk_water.select_atoms("name OW")[:300]
    bundle = ComputeOptions(device="cpu", precision="single", n_threads=1, method="cells")
    by_bundle = InterRDF(ow, ow, range=(0.0, 8.0), compute=bundle).run(stop=2)
    by_keywords = InterRDF(ow, ow, range=(0.0, 8.0), device="cpu", precision="single",
                           n_threads=1, method="cells").run(stop=2)
    np.testing.assert_array_equal(by_bundle.results.count_uint64,
                                  by_keywords.results.count_uint64)
    assert (by_bundle.device, by_bundle.precision, by_bundle.n_threads, by_bundle.method) == (
        "cpu", "single", 1, "cells")
    assert by_bundle.compute == by_keywords.compute == bundle
    water = adk_water.select_atoms("resname SOL")[:300]
    a = SpeciesRDF(water, compute=bundle, range=(0.0, 6.0)).run(stop=1)
    b = SpeciesRDF(water, device="cpu", precision="single", n_threads=1, method="cells",
                   range=(0.0, 6.0)).run(stop=1)
    np.testing.assert_array_equal(a.results.count_uint64, b.results.count_uint64)


def test_defaults():
    assert ComputeOptions() == ComputeOptions("auto", "double", None, "auto")


@pytest.mark.parametrize("field, value, word", [
    ("device", "gpu", "device"), ("precision", "half", "precision"),
    ("n_threads", 0, "n_threads"), ("method", "grid", "method")])
def test_bundle_checks_each_option(field, value, word):
    with pytest.raises(ValueError, match=word):
        ComputeOptions(**{field: value})


def test_bundle_and_keyword_together(adk_water):
    ow = adk_water.select_atoms("name OW")[:10]
    with pytest.raises(TypeError, match="compute= and 'n_threads'"):
        InterRDF(ow, ow, compute=ComputeOptions(device="cpu"), n_threads=2)


def test_bundle_of_another_type(adk_water):
    ow = adk_water.select_atoms("name OW")[:10]
    with pytest.raises(TypeError, match="must be a ComputeOptions, got dict"):
        InterRDF(ow, ow, compute={"device": "cpu"})


def test_options_an_analysis_does_not_take(adk_water):
    """IntermediateScattering has no precision or method, InterRDF_s no method: the keyword
    is unknown, and a bundle that sets it is a ValueError naming it."""
    ow = adk_water.select_atoms("name OW")[:20]
    with pytest.raises(TypeError, match="'precision'"):
        IntermediateScattering(ow, q=[1.0], lags=2, precision="single")
    with pytest.raises(ValueError, match="does not take 'precision'"):
        IntermediateScattering(ow, q=[1.0], lags=2,
                               compute=ComputeOptions(precision="single"))
    with pytest.raises(ValueError, match="does not take 'method'"):
        InterRDF_s(adk_water, [[ow[:2], ow[2:4]]], compute=ComputeOptions(method="cells"))
    # a bundle that leaves them at their defaults is taken
    isf = IntermediateScattering(ow, q=[1.0], lags=2, compute=ComputeOptions(n_threads=1))
    assert isf.n_threads == 1


def test_interrdf_s_refuses_a_gpu(adk_water):
    """InterRDF_s names its own limit before the device is checked (also without CUDA)."""
    ow = adk_water.select_atoms("name OW")[:4]
    with pytest.raises(ValueError, match="InterRDF_s has no GPU kernel"):
        InterRDF_s(adk_water, [[ow[:2], ow[2:4]]], device="cuda")


def test_van_hove_takes_the_bundle(adk_water):
    ow = adk_water.select_atoms("name OW")[:50]
    # (the XTC's frames are too far apart for the self part)
    a = VanHove(ow, lags=[1], range=(0.0, 5.0), nbins=10, self_part=False,
                compute=ComputeOptions(device="cpu", n_threads=1)).run(stop=3)
    b = VanHove(ow, lags=[1], range=(0.0, 5.0), nbins=10, self_part=False, device="cpu",
                n_threads=1).run(stop=3)
    assert a.results.count_distinct.sum() > 0
    np.testing.assert_array_equal(a.results.count_distinct, b.results.count_distinct)
