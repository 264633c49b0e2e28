"""One box policy for every analysis (issue 39): r_max beyond half the smallest
perpendicular box width makes an RDF incomplete, which InterRDF and SpeciesRDF say in a
warning (as MDAnalysis computes it too); StructureFactor and KirkwoodBuff need g(r) whole up
to r_max and refuse such a box: at construction for the current frame, and in the run for
any later frame whose box has shrunk (an NPT trajectory), naming the frame."""

import warnings

import numpy as np
import pytest
from conftest import make_universe, random_positions_in_box

from mdakit_fastrdf import InterRDF, KirkwoodBuff, SpeciesRDF, StructureFactor


@pytest.fixture(scope="module")
def shrinking():
    """A two-species gas whose cubic box shrinks from 24 to 17 Å over 8 frames: half its
    width falls below 10 Å at frame 5 (19 / 2 = 9.5)."""
    rng = np.random.default_rng(39)
    dims = np.array([[24.0 - f, 24.0 - f, 24.0 - f, 90, 90, 90] for f in range(8)])
    coords = np.stack([random_positions_in_box(rng, 80, d)[0] for d in dims])
    return make_universe(coords, dims, names=["A"] * 40 + ["B"] * 40)


def _kb(u):
    return KirkwoodBuff(u.atoms, by="name", nbins=50, range=(0.0, 10.0))


def _sq(u):
    return StructureFactor(u.atoms, by="name", nbins=50, range=(0.0, 10.0))


@pytest.mark.parametrize("make", [_kb, _sq], ids=["KirkwoodBuff", "StructureFactor"])
def test_a_later_narrower_box_is_an_error_naming_its_frame(shrinking, make):
    shrinking.trajectory[0]  # 24 A: fine at construction
    analysis = make(shrinking)
    with pytest.raises(ValueError, match=r"frame 5: range \(0, 10\) reaches beyond half the "
                                         r"smallest box width \(9\.5 Å\)"):
        analysis.run()
    shrinking.trajectory[0]  # (the failed run left the trajectory at frame 5)
    make(shrinking).run(stop=5)  # the frames before it are fine (frame 4: exactly 10)


@pytest.mark.parametrize("make", [_kb, _sq], ids=["KirkwoodBuff", "StructureFactor"])
def test_the_current_frame_is_checked_at_construction(shrinking, make):
    shrinking.trajectory[6]
    try:
        with pytest.raises(ValueError, match="the current frame: range .* use r_max <= 9"):
            make(shrinking)
    finally:
        shrinking.trajectory[0]


@pytest.mark.parametrize("make", [
    lambda u: InterRDF(u.select_atoms("name A"), u.select_atoms("name B"), nbins=50,
                       range=(0.0, 10.0)),
    lambda u: SpeciesRDF(u.atoms, by="name", nbins=50, range=(0.0, 10.0)),
], ids=["InterRDF", "SpeciesRDF"])
def test_rdfs_warn_instead(shrinking, make):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        make(shrinking).run()
    assert any("beyond half the smallest box width" in str(w.message) for w in record)
