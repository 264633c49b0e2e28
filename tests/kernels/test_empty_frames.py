"""Frames in which an UpdatingAtomGroup holds no atom (issue 38, item 3)."""

import numpy as np
import pytest

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.cli import main


def test_every_frame_empty_is_an_error(adk_water):
    g = adk_water.select_atoms("name OW and prop z > 1e6", updating=True)
    with pytest.raises(ValueError, match=r"g1 \('name OW and prop z > 1e6'\) holds no atom "
                                         r"in any of the 2 frames"):
        InterRDF(g, g).run(stop=2)


def test_some_frames_empty_are_counted_and_warned(adk_water):
    """Frames 0-9: the group holds atoms only where the box is wider than z0 (brute force:
    the frames where NumPy finds an OW above z0)."""
    z = np.array([ts.positions[adk_water.select_atoms("name OW").ix, 2].max()
                  for ts in adk_water.trajectory])
    z0 = float(np.median(z))
    g = adk_water.select_atoms(f"name OW and prop z > {z0}", updating=True)
    ow = adk_water.select_atoms("name OW")
    with pytest.warns(RuntimeWarning, match="hold no atom in g1"):
        r = InterRDF(g, ow, nbins=20, range=(0.0, 6.0)).run()
    expected = int((z <= z0).sum())
    assert 0 < expected < len(z)
    assert r.results.n_empty_frames == expected
    assert np.all(np.isfinite(r.results.rdf))


def test_cli_every_frame_empty_exits_1(tmp_path, capsys):
    out = tmp_path / "rdf.npz"
    assert main(["-s1", "name OW and prop z > 1e6", "--updating", "--stop", "2",
                 "--no-progress", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "holds no atom in any of the 2 frames" in err
    assert "--start" in err and "-s1" in err
    assert not out.exists()
