"""Planar RDFs within a slab: mdakit_fastrdf ``LateralRDF(slab=h, distance='3d')`` against
maicos ``PDFPlanar`` (issue 26, item 1), timed in the same run, counts compared.

maicos's PDFPlanar bins the 3D distance of every g1-g2 pair whose separation along the normal
is at most ``dzheight`` (minimum image), for the g1 atoms of each layer of a z grid, and
divides by the ring volume ``pi (r_{k+1}^2 - r_k^2) 2 dz`` and the layer's g1 count. The same
pairs are ``LateralRDF(g1, g2, slab=dz, distance='3d')``; its counts are compared with
maicos's, recovered from ``results.pdf`` as ``pdf * <n_g1> * ring volume * n_frames``.

Two systems:

* **membrane**: the 276 lipid P atoms of MDAnalysisTests' membrane-protein system
  (GRO_MEMPROT/XTC_MEMPROT, 5 frames, hexagonal box), g1 = g2, maicos with one layer
  spanning the box (``bin_width`` = box height), ours with ``exclusion_block=(1, 1)``
  (maicos drops pairs at distance 0). Times include reading the frames, which both do; the
  table gives an empty AnalysisBase run over the same frames too (MDAnalysis reading them
  as both analyses do, its closing rewind included), and the ratio of the times beyond it.
* **film**: a generated film of ``--atoms`` uniformly random atoms (thickness 25 Å, density
  0.08 Å^-3, in a box 80 Å high), one frame in memory. maicos cannot take it as one layer
  (its pair lists of 10k atoms need 4.7 GB, 20k 9.4 GB, measured), so both resolve it in
  1-Å layers of g1, maicos's way (``bin_width=1``): maicos in one run, ours one
  ``LateralRDF`` per layer with an updating selection ``prop z >= k and prop z < k + 1`` as
  g1 and every atom as g2 (``exclude_same='residue'``, one atom per residue: the atom
  itself). A last row gives ours over all layers at once (the sum of the layers' counts).
  The distances of maicos come from MDAnalysis's grid search, whose rounding differs from
  the kernels' (float32 differences widened to float64) by ~5e-8 of r: the few pairs within
  ~1e-6 Å of a bin edge may land in the neighbouring bin, and those within ~1e-6 Å of
  |dz| = dz or r = rmax in or out, which the table counts.

Times are process CPU time (all threads) per frame: ours the best of ``--repeat`` runs,
maicos the best of ``--repeat-maicos`` (the film: one run, ~4 minutes a frame at 100k
atoms on a 2-core EPYC). On the membrane a last column gives the median (and range) of the
ratios of ``--paired`` rounds of one maicos run followed by one of ours, which a drift of
the machine's speed between the best-of columns does not skew. Bins: 0.25 Å from 0 to 25 Å (100 bins).

    python benchmarks/bench_lateral.py [--repeat 5] [--repeat-maicos 3] [--paired 9]
                                       [--atoms 100000] [--dz 0.5] [--skip-film]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings

import numpy as np

DMAX = 25.0
WIDTH = 0.25


def best_time(f, repeat):
    """(best process CPU seconds, best wall seconds, the last result) of `repeat` calls."""
    cpu, wall, out = np.inf, np.inf, None
    for _ in range(repeat):
        t0, w0 = time.process_time(), time.perf_counter()
        out = f()
        cpu = min(cpu, time.process_time() - t0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall, out


def maicos_counts(m, n_frames, dz):
    """maicos's counts per (layer, bin), recovered from its pdf, and its edges."""
    edges = np.histogram([-1], bins=len(m.results.bins), range=(m.dmin, m.dmax))[1]
    ring = np.pi * np.diff(edges ** 2) * 2 * dz
    n_g1 = m.means.n_g1[:, 0]
    return m.results.pdf.T * n_g1[:, None] * ring[None, :] * n_frames, edges


def membrane(args):
    import maicos
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import GRO_MEMPROT, XTC_MEMPROT

    from mdakit_fastrdf import LateralRDF

    u = mda.Universe(GRO_MEMPROT, XTC_MEMPROT)
    p = u.select_atoms("name P")
    nf = u.trajectory.n_frames
    height = float(max(ts.dimensions[2] for ts in u.trajectory)) + 1.0
    from MDAnalysis.analysis.base import AnalysisBase

    class Empty(AnalysisBase):  # the frames read as both analyses read them, nothing else
        def _single_frame(self):
            pass

    print(f"## membrane: {len(p)} P atoms (GRO_MEMPROT/XTC_MEMPROT), {nf} frames, "
          f"{int(DMAX / WIDTH)} bins over 0-{DMAX:g} Å")
    print("| dz (Å) | maicos PDFPlanar (ms/frame) | LateralRDF double (ms/frame) | "
          "LateralRDF single (ms/frame) | empty AnalysisBase run (ms/frame) | speed-up "
          "(double) | speed-up beyond the empty run | counts equal | pdf equal for r >= dz | "
          "speed-up in wall time (double) | speed-up (double), paired rounds: median "
          "[min-max] |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for dz in (0.5, 2.0):
        def run_maicos():
            return maicos.PDFPlanar(p, p, pdf_bin_width=WIDTH, dzheight=dz, dmin=0.0,
                                    dmax=DMAX, dim=2, bin_width=height,
                                    output="/dev/null").run()

        def run_ours(precision):
            return LateralRDF(p, p, nbins=int(DMAX / WIDTH), range=(0.0, DMAX),
                              exclusion_block=(1, 1), slab=dz, distance="3d", norm="density",
                              precision=precision).run()

        t_m, w_m, m = best_time(run_maicos, args.repeat_maicos)
        t_d, w_d, r = best_time(lambda: run_ours("double"), args.repeat)
        t_s, _, r_s = best_time(lambda: run_ours("single"), args.repeat)
        t_e = best_time(lambda: Empty(u.trajectory).run(), args.repeat)[0]
        # paired rounds: maicos and ours one after the other, the ratio of each round (a
        # drift of the machine's speed between the best-of columns does not enter it)
        paired = []
        for _ in range(args.paired):
            paired.append(best_time(run_maicos, 1)[0] / best_time(lambda: run_ours("double"), 1)[0])
        mc, edges = maicos_counts(m, nf, dz)
        mc = mc[0]
        counts_equal = bool(np.abs(mc - np.rint(mc)).max() < 1e-6 and
                            np.array_equal(np.rint(mc).astype(np.int64),
                                           r.results.count_uint64.astype(np.int64)))
        # ours norm='density': n_k / (N_f S_k); maicos: n_k / (N_f n_g1 ring 2 dz); the
        # shells agree where r_k >= dz (LateralRDF's Notes)
        beyond = edges[:-1] >= dz
        ours_pdf = r.results.rdf / len(p)
        pdf_equal = bool(np.allclose(ours_pdf[beyond], m.results.pdf[beyond, 0], rtol=1e-12,
                                     atol=0))
        print(f"| {dz:g} | {t_m / nf * 1e3:.2f} | {t_d / nf * 1e3:.2f} | {t_s / nf * 1e3:.2f} "
              f"| {t_e / nf * 1e3:.2f} | {t_m / t_d:.1f}x | {(t_m - t_e) / (t_d - t_e):.0f}x | "
              f"{counts_equal} | {pdf_equal} | {w_m / w_d:.1f}x | {np.median(paired):.1f}x "
              f"[{min(paired):.1f}-{max(paired):.1f}] |", flush=True)


def film_universe(n_atoms, seed=0):
    import MDAnalysis as mda

    lxy = 200.0 * (n_atoms / 100000) ** 0.5  # 0.08 atoms per Å^3 in a 25 Å film
    box = np.array([lxy, lxy, 80.0, 90.0, 90.0, 90.0])
    rng = np.random.default_rng(seed)
    x = np.empty((1, n_atoms, 3), np.float32)
    x[0, :, :2] = rng.random((n_atoms, 2)) * lxy
    x[0, :, 2] = 40.0 + (rng.random(n_atoms) - 0.5) * 25.0
    u = mda.Universe.empty(n_atoms, n_residues=n_atoms, atom_resindex=np.arange(n_atoms),
                           trajectory=True)
    u.add_TopologyAttr("masses", np.ones(n_atoms))
    u.add_TopologyAttr("charges", np.zeros(n_atoms))
    u.load_new(x, order="fac", dimensions=box)
    return u


def film(args):
    import maicos

    from mdakit_fastrdf import LateralRDF

    u = film_universe(args.atoms)
    dz = args.dz
    nbins = int(DMAX / WIDTH)
    layers = [k for k in range(80)]
    kw = dict(nbins=nbins, range=(0.0, DMAX), slab=dz, distance="3d", norm="density",
              precision="double")

    def run_ours():
        counts = np.zeros((len(layers), nbins), np.int64)
        for k in layers:
            g1 = u.select_atoms(f"prop z >= {k} and prop z < {k + 1}", updating=True)
            r = LateralRDF(g1, u.atoms, exclude_same="residue", **kw).run()
            counts[k] = r.results.count_uint64
        return counts

    def run_all():
        return LateralRDF(u.atoms, u.atoms, exclusion_block=(1, 1), **kw).run()

    print(f"## film: {args.atoms} atoms, 1 frame in memory, box {u.dimensions[:3].round(1)} Å, "
          f"dz = {dz:g} Å, 1-Å layers of g1, {nbins} bins over 0-{DMAX:g} Å")
    print("| what | maicos PDFPlanar (s/frame) | LateralRDF (s/frame) | speed-up | "
          "counts equal |")
    print("| --- | --- | --- | --- | --- |")
    t_o, w_o, counts = best_time(run_ours, args.repeat)
    t_a, w_a, r_all = best_time(run_all, args.repeat)
    if args.skip_maicos:
        print(f"| per layer (one LateralRDF a layer) | (skipped) | {t_o:.3f} | | |")
        print(f"| all layers at once (one LateralRDF) | | {t_a:.3f} | | "
              f"{bool(np.array_equal(counts.sum(0), r_all.results.count_uint64))} |")
        return
    t_m, w_m, m = best_time(lambda: maicos.PDFPlanar(
        u.atoms, u.atoms, pdf_bin_width=WIDTH, dzheight=dz, dmin=0.0, dmax=DMAX, dim=2,
        bin_width=1.0, output="/dev/null").run(), args.repeat_maicos_film)
    mc, _ = maicos_counts(m, 1, dz)
    assert np.abs(mc - np.rint(mc)).max() < 1e-6
    diff = np.rint(mc).astype(np.int64) - counts
    # pairs within ~1e-6 Å of an edge can fall into the next bin: maicos's distances come
    # from MDAnalysis's grid search, rounded differently (float32 differences, ~5e-8 of r)
    # (and a pair within ~1e-6 Å of |dz| = dz or of r = rmax can be in or out)
    in_out = int(np.abs(diff.sum(axis=1)).sum())
    moved = int((np.abs(diff).sum() - in_out) // 2)
    equal = (f"{diff.size - np.count_nonzero(diff)} of {diff.size} (layer, bin) counts equal; "
             f"of {int(counts.sum())} pairs {moved} in a neighbouring bin, {in_out} in or out "
             "of the slab or range")
    print(f"| per layer (one LateralRDF a layer) | {t_m:.2f} | {t_o:.3f} | {t_m / t_o:.0f}x | "
          f"{equal} |")
    all_equal = bool(np.array_equal(counts.sum(0), r_all.results.count_uint64))
    print(f"| all layers at once (one LateralRDF; maicos: the same run) | {t_m:.2f} | "
          f"{t_a:.3f} | {t_m / t_a:.0f}x | {all_equal} (sum of the layers) |")
    print(f"# wall: maicos {w_m:.2f} s, ours per layer {w_o:.3f} s, all at once {w_a:.3f} s")


def main(argv=None):
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _common import describe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--repeat-maicos", type=int, default=3)
    parser.add_argument("--repeat-maicos-film", type=int, default=1)
    parser.add_argument("--paired", type=int, default=9,
                        help="rounds of maicos then ours (double), one run each, for the "
                             "median of their ratios")
    parser.add_argument("--atoms", type=int, default=100000)
    parser.add_argument("--dz", type=float, default=0.5)
    parser.add_argument("--skip-film", action="store_true")
    parser.add_argument("--skip-maicos", action="store_true",
                        help="the film without maicos (minutes a frame at 100k atoms)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)  # maicos's notes on the box
    print(f"# {describe(peers=('MDAnalysis', 'maicos'))}")
    print(f"# command: python {' '.join(sys.argv)}")
    print("# process CPU time (all threads) per frame; ours the best of --repeat runs")
    membrane(args)
    if not args.skip_film:
        print()
        film(args)


if __name__ == "__main__":
    main()
