"""The first shell (one rule for the first peak and the first minimum) on the two cases of
issue 38 and on noisy few-frame data, against minima checked by hand on the printed
curves (values quoted below) and against a synthetic g(r) with Poisson counts."""

import re

import numpy as np
import pytest
from MDAnalysisTests.datafiles import TPR, XTC

from mdakit_fastrdf import InterRDF, first_shell
from mdakit_fastrdf.cli import main


def test_na_ow_noise_dip_is_not_the_minimum(adk_water):
    """Na+ - OW, 200 bins over 0-10 Å, 10 frames (4 ions): the printed curve peaks at
    2.425 Å (g = 8.19), dips to 2.86 at 2.525 Å (one bin, noise: 5.50 at 2.575 Å), and
    stays below 0.7 from 2.775 to 3.875 Å (one to a few pairs per bin) before the second
    shell; n(r) is 5.75 at 3.0 Å and 6.0 at 3.3 Å. The old rule gave 2.525 Å, n = 3.5."""
    na, ow = adk_water.select_atoms("resname NA+"), adk_water.select_atoms("name OW")
    shell = InterRDF(na, ow, nbins=200, range=(0.0, 10.0)).run().first_shell()
    assert shell.r_peak in (pytest.approx(2.425), pytest.approx(2.475))  # 8.19, 8.08
    assert 3.0 <= shell.r_min <= 3.5
    assert 5.7 <= shell.coordination <= 6.2


def test_na_ow_three_frames_fine_bins(adk_water):
    """The same with 3 frames and 0.025 Å bins (a pair or none in most bins of the shell's
    bottom): the minimum stays in 3.0-3.5 Å, n = 5.6-6.2."""
    na, ow = adk_water.select_atoms("resname NA+"), adk_water.select_atoms("name OW")
    shell = InterRDF(na, ow, nbins=400, range=(0.0, 10.0)).run(stop=3).first_shell()
    assert 2.3 <= shell.r_peak <= 2.6
    assert 3.0 <= shell.r_min <= 3.5
    assert 5.6 <= shell.coordination <= 6.2


def test_ow_hw_peak_before_minimum(adk_water, tmp_path, capsys):
    """OW - HW1/HW2 without exclusions: the O-H bond is the first peak (0.975 Å, g = 52.8
    on the printed curve), then no pair from 1.025 to 1.475 Å: the first minimum lies in
    that gap, with exactly 2 H (the molecule's own). The CLI printed a first peak at
    1.825 Å and a minimum at 1.025 Å, from two rules."""
    ow, hw = adk_water.select_atoms("name OW"), adk_water.select_atoms("name HW1 HW2")
    shell = InterRDF(ow, hw, nbins=200, range=(0.0, 10.0)).run(stop=2).first_shell()
    assert shell.r_peak == pytest.approx(0.975)
    assert 1.025 <= shell.r_min <= 1.475
    assert shell.coordination == pytest.approx(2.0, abs=1e-12)

    out = tmp_path / "oh.npz"
    assert main([TPR, XTC, "-s1", "name OW", "-s2", "name HW1 HW2", "--range", "0", "10",
                 "--nbins", "200", "--stop", "2", "--no-progress", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    r_peak = float(re.search(r"First peak : .* at r = ([\d.]+) Å", text)[1])
    r_min = float(re.search(r"First shell: minimum at r = ([\d.]+) Å", text)[1])
    assert r_peak == pytest.approx(shell.r_peak, abs=1e-3) and r_peak < r_min
    assert r_min == pytest.approx(shell.r_min, abs=1e-3)
    assert "--exclude-same residue leaves them out" in text


def test_ow_hw_hydrogen_bonds(adk_water):
    """With the molecule's own H left out: the hydrogen-bond peak (1.825 Å, g = 1.56 on
    the printed curve) and its minimum (lowest, 0.224, at 2.425 Å; n = 1.83-1.86 there)."""
    ow, hw = adk_water.select_atoms("name OW"), adk_water.select_atoms("name HW1 HW2")
    shell = InterRDF(ow, hw, nbins=200, range=(0.0, 10.0),
                     exclude_same="residue").run().first_shell()
    assert shell.r_peak == pytest.approx(1.825)
    assert 2.35 <= shell.r_min <= 2.5
    assert 1.78 <= shell.coordination <= 1.9


@pytest.mark.parametrize("nbins", [600, 1000])
def test_ow_ow_one_frame_fine_bins(adk_water, nbins):
    """Water O-O from one frame in 0.025 or 0.015 Å bins: the minimum is the shallow one
    at 3.2-3.6 Å with 4.2-5.2 neighbours (10 frames in 0.2 Å bins: 3.3 Å, n = 4.3), not a
    noise dip on the peak's flank (the old rule: 3.04 Å, n = 3.2, and 2.70 Å, n = 0.7)."""
    ow = adk_water.select_atoms("name OW")
    r = InterRDF(ow, ow, nbins=nbins, range=(0.0, 15.0), exclusion_block=(1, 1)).run(stop=1)
    shell = r.first_shell()
    assert 2.7 <= shell.r_peak <= 2.85
    assert 3.2 <= shell.r_min <= 3.6
    assert 4.2 <= shell.coordination <= 5.2


@pytest.mark.parametrize("seed", range(6))
def test_poisson_counts_of_a_known_curve(seed):
    """Counts drawn from a known g(r) (peak 3.0 Å, minimum at the analytic one): the
    rule's peak and minimum are within 0.15 Å of the true ones, for a few hundred pairs in
    the shell."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(0.0, 10.0, 401)
    bins = 0.5 * (edges[1:] + edges[:-1])
    g = np.where(bins < 2.5, 0.0, 1 + 1.5 * np.exp(-(bins - 3.0) ** 2 / 0.08)
                 - 0.6 * np.exp(-(bins - 3.9) ** 2 / 0.15)
                 + 0.3 * np.exp(-(bins - 4.9) ** 2 / 0.2))
    fine = np.linspace(3.2, 4.6, 14001)
    fine_g = np.interp(fine, bins, g)
    true_min = fine[np.argmin(fine_g)]
    volume = 4.0 / 3.0 * np.pi * np.diff(edges ** 3)
    scale = 2.0  # pairs per unit of g and Å³: ~ 1 pair per bin at the minimum
    count = rng.poisson(scale * g * volume).astype(float)
    g_hat = count / (scale * volume)
    coordination = np.cumsum(count) / 100.0
    shell = first_shell(bins, g_hat, coordination, count=count)
    assert shell.r_peak == pytest.approx(3.0, abs=0.15)
    assert shell.r_min == pytest.approx(true_min, abs=0.15)
