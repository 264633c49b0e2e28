"""Make the figures of the documentation's gallery from MDAnalysisTests data.

Run from the repository root (about half a minute on two cores)::

    python docs/gallery/make_figures.py

It writes ``docs/gallery/*.png``, which are committed, so that building the docs needs
only Sphinx. Each example is a self-contained block between ``# [name]`` and
``# [name end]`` markers; the gallery page includes those blocks verbatim.
"""

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", module="MDAnalysis")


def water():
    # [water]
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import InterRDF

    u = mda.Universe(TPR, XTC)  # adenylate kinase in water, 10 frames
    ow = u.select_atoms("name OW")
    rdf = InterRDF(ow, ow, nbins=80, range=(0.0, 8.0), exclusion_block=(1, 1))
    rdf.run(blocks=5)  # 5 blocks of 2 frames: standard errors in results.rdf_sem

    ax = rdf.plot(coordination=True, label="water O–O (± standard error, 5 blocks)")
    # first-shell coordination number: n(r) at the first minimum after the first peak
    res = rdf.results
    peak = res.rdf.argmax()
    k = peak + res.rdf[peak:peak + 10].argmin()
    n_first = res.count[: k + 1].sum() / (rdf.n_frames * len(ow))
    ax.axvline(res.edges[k + 1], color="0.5", linewidth=0.8)
    ax.annotate(f"first shell: n = {n_first:.2f}\nwithin {res.edges[k + 1]:.1f} Å",
                (res.edges[k + 1], 2.0), xytext=(6, 0), textcoords="offset points")
    ax.set_title("Water O–O, adenylate kinase in water (10 frames)")
    ax.figure.savefig("water_oo.png", dpi=150)
    rdf.save("water_oo.csv")  # the numbers, units and parameters
    # [water end]
    return ax.figure, rdf


def partials():
    # [species]
    import matplotlib.pyplot as plt
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import SpeciesRDF

    u = mda.Universe(TPR, XTC)
    srdf = SpeciesRDF(u.atoms, by="element", nbins=80, range=(0.0, 10.0),
                      exclude_same="residue")  # no intramolecular pairs
    srdf.run()  # all 28 element pairs in one kernel call per frame

    species = [s for s in srdf.results.species if s]  # '' are TIP4P virtual sites
    fig, axes = plt.subplots(len(species), len(species), figsize=(12, 11),
                             sharex=True, layout="constrained")
    for i, a in enumerate(species):
        for j, b in enumerate(species):
            ax = axes[i, j]
            if j < i:
                ax.set_axis_off()
                continue
            srdf.plot(ax=ax, pairs=[(a, b)], legend=False, linewidth=1.0)
            ax.set_title(f"{a}–{b}", fontsize=9, pad=2)
            ax.set_xlabel("r (Å)" if i == len(species) - 1 else "")
            ax.set_ylabel("g(r)" if i == j else "")
            ax.tick_params(labelsize=7)
    fig.suptitle("All element partial RDFs of adenylate kinase in water (SpeciesRDF)")
    fig.savefig("adk_partials.png", dpi=110)
    # [species end]
    return fig, srdf


def sites():
    # [sites]
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import GRO_MEMPROT, XTC_MEMPROT

    from mdakit_fastrdf import InterRDF_s

    u = mda.Universe(GRO_MEMPROT, XTC_MEMPROT)  # membrane protein with zinc sites
    zn = u.select_atoms("name ZND and resid 289")
    od = u.select_atoms("(name OD1 or name OD2) and sphzone 5.0 (resid 289)")
    s = InterRDF_s(u, [[zn, od]], nbins=60, range=(1.0, 4.0), precision="double").run()

    ax = s.plot(coordination=True)  # one line per zinc-oxygen site pair
    ax.legend(loc="center right", fontsize="small", frameon=False)
    ax.set_title("Zn 289 – Asp carboxylate O sites (InterRDF_s, 5 frames)")
    ax.figure.savefig("zinc_sites.png", dpi=150)
    # [sites end]
    return ax.figure, s


def scattering():
    # [scattering]
    import matplotlib.pyplot as plt
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import StructureFactor

    u = mda.Universe(TPR, XTC)  # adenylate kinase in water, 10 frames
    water = u.select_atoms("resname SOL and not name MW")  # O and H (MW: TIP4P site)
    options = {"by": "element", "nbins": 1200, "range": (0.0, 12.0), "qbins": 100,
               "q_range": (0.0, 10.0)}
    xray = StructureFactor(water, weights="xray", **options).run()
    # neutrons: heavy water (b_c of deuterium for the H atoms; with H, <b> is nearly 0)
    from periodictable import D, O

    d2o = {"H": D.neutron.b_c, "O": O.neutron.b_c}
    neutron = StructureFactor(water, weights=d2o, **options).run()

    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.0), layout="constrained")
    res = xray.results
    for k, (a, b) in enumerate(res.pairs):
        left.plot(res.q, res.partials[k],
                  label=f"S$_{{{res.species[a]}{res.species[b]}}}$(q)")
    left.set_title("Faber–Ziman partials, water of adk (10 frames)")
    right.plot(res.q, res.s, label="X-ray (form factors)")
    right.plot(neutron.results.q, neutron.results.s, label="neutron (D$_2$O)")
    right.set_title("Total Faber–Ziman S(q)")
    for ax in (left, right):
        ax.axhline(1.0, color="0.6", linewidth=0.8, linestyle=":")
        ax.set_xlabel("q (Å$^{-1}$)")
        ax.set_ylim(-2.0, 3.0)  # below 0.3 1/Å S rises to ~80: the protein's cavity
        ax.legend(frameon=False)
    left.set_ylabel("S(q)")
    fig.savefig("water_sq.png", dpi=150)
    xray.save("water_sq_xray.csv")  # S(q), F(q) and the partials as tables over q
    # [scattering end]
    return fig, xray


def dynamics():
    # [dynamics]
    import matplotlib.pyplot as plt
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import PRMpbc, TRJpbc_bz2

    from mdakit_fastrdf import DynamicStructureFactor, IntermediateScattering, VanHove

    # alanine dipeptide in 1,683 waters: a constant box, 11 frames (the file has no time
    # step; MDAnalysis counts 1 ps between frames)
    u = mda.Universe(PRMpbc, TRJpbc_bz2)
    u.guess_TopologyAttrs(to_guess=["elements"])
    water = u.select_atoms("resname WAT")
    oxygens = water.select_atoms("name O")
    isf = IntermediateScattering(oxygens, q=[0.5, 1.0, 2.0, 3.0], lags=10).run()
    vh = VanHove(oxygens, lags=[0, 2, 5, 10], nbins=80, range=(0.0, 8.0)).run()
    # quasi-elastic neutron scattering: the hydrogens' incoherent S_s(q, omega)
    qens = DynamicStructureFactor(water.select_atoms("element H"), q=[1.0, 2.0], lags=10,
                                  weights="neutron", coherent=False).run()

    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(15.0, 4.0),
                                              layout="constrained")
    res = isf.results
    for k, q in enumerate(res.q):
        line, = left.plot(res.times, res.f_self_total[:, k], label=f"q = {q:g} Å$^{{-1}}$")
        left.plot(res.times, res.f_total[:, k] / res.f_total[0, k], "--",
                  color=line.get_color())
    left.set_xlabel("t (ps)")
    left.set_ylabel("F$_s$(q, t) (solid), F(q, t) / S(q) (dashed)")
    left.set_title("Water O: intermediate scattering")
    r = vh.results
    for j, t in enumerate(r.times):
        middle.plot(r.bins, r.g_distinct[0, j], label=f"t = {t:g} ps")
    middle.set_xlabel("r (Å)")
    middle.set_ylabel("G$_d$(r, t)")
    middle.set_title("Water O: distinct van Hove function")
    s = qens.results
    for k, q in enumerate(s.q):
        right.plot(s.omega, s.s_self_total[:, k], label=f"q = {q:g} Å$^{{-1}}$")
    right.set_xlabel("ω (rad/ps)")
    right.set_ylabel("S$_s$(q, ω) (ps)")
    right.set_title("Water H: incoherent neutron S(q, ω), Hann window")
    for ax in (left, middle, right):
        ax.legend(frameon=False)
    fig.savefig("water_dynamics.png", dpi=150)
    vh.save("water_van_hove.npz")
    # [dynamics end]
    return fig, vh


if __name__ == "__main__":
    import os

    os.chdir(HERE)
    for make in (water, partials, sites, scattering, dynamics):
        fig, analysis = make()
        plt.close(fig)
        print(f"{make.__name__}: {type(analysis).__name__}, {analysis.n_frames} frames")
