"""Make the gallery's "default plots": what ``plot()`` and ``mdakit-fastrdf --plot`` draw
with no option beyond the defaults, on MDAnalysisTests data (adenylate kinase in water).

Run from the repository root (about 20 s on two cores)::

    python docs/gallery/make_default_plots.py

It writes ``docs/gallery/default_*.png`` (committed, so that building the docs needs only
Sphinx). ``tests/outputs/test_plots.py`` checks the same plots' limits, legends, titles and labels.
"""

import contextlib
import io
import os
import tempfile
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import MDAnalysis as mda  # noqa: E402
import numpy as np  # noqa: E402
from MDAnalysisTests.datafiles import TPR, XTC  # noqa: E402

from mdakit_fastrdf import (  # noqa: E402
    DebyeScattering,
    InterRDF,
    InterRDF_s,
    LateralRDF,
    SpeciesRDF,
    StructureFactor,
)
from mdakit_fastrdf.cli import main  # noqa: E402

HERE = Path(__file__).resolve().parent
warnings.filterwarnings("ignore")


def universe():
    u = mda.Universe(TPR, XTC)
    u.guess_TopologyAttrs(to_guess=["elements"])
    return u


def save(ax, name):
    ax.figure.savefig(HERE / name, dpi=110)
    plt.close(ax.figure)


def cli(name, args):
    """Run the command line with --plot docs/gallery/<name>, its other outputs in a temporary
    folder."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        rc = main([*args, "--no-progress", "-o", os.path.join(tmp, "out.csv"),
                   "--plot", str(HERE / name)])
    assert rc == 0, (name, args)


def make(u):
    ow = u.select_atoms("name OW")
    water = u.select_atoms("resname SOL and not name MW")

    rdf = InterRDF(ow, ow, nbins=150, range=(0.0, 15.0), exclusion_block=(1, 1))
    save(rdf.run(blocks=5).plot(coordination=True), "default_interrdf.png")

    cli("default_cli_rdf.png", [TPR, XTC, "-s1", "resname NA+", "-s2", "name OW",
                                "--range", "0", "10", "--nbins", "200", "--coordination",
                                "--blocks", "5"])

    species = SpeciesRDF(water, by="element", nbins=150, range=(0.0, 10.0),
                         exclude_same="residue")
    save(species.run().plot(), "default_species.png")

    na = u.select_atoms("resname NA+")
    sites = InterRDF_s(u, [[na[:2], ow[:3]]], nbins=100, range=(0.0, 15.0))
    save(sites.run().plot(), "default_sites.png")

    lateral = LateralRDF(ow, ow, nbins=120, range=(0.0, 12.0), exclusion_block=(1, 1))
    save(lateral.run().plot(), "default_lateral.png")

    sf = StructureFactor(water, weights="xray", nbins=600, range=(0.0, 12.0), qbins=160,
                         q_range=(0.0, 10.0))
    save(sf.run().plot(), "default_sq.png")

    cli("default_cli_sq.png", ["sq", TPR, XTC, "--select", "resname SOL and not name MW",
                               "--weights", "xray", "--guess-elements"])

    saxs = DebyeScattering(u.select_atoms("protein"), q=np.linspace(0.02, 0.6, 60),
                           ignore_box=True)
    save(saxs.run(stop=2).plot(), "default_debye.png")


if __name__ == "__main__":
    make(universe())
    print("\n".join(sorted(p.name for p in HERE.glob("default_*.png"))))
