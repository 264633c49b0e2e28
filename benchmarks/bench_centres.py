"""RDF between residue centres of mass: mdakit_fastrdf against MDAnalysis (issue 26, item 2).

The water of the adenylate kinase demo (MDAnalysisTests TPR/XTC, triclinic box; the
residues' O, HW1 and HW2, bonded; the unbonded virtual site MW left out), one centre of
mass per residue (11084), 75 bins over 0-15 Å, ``exclusion_block=(1, 1)``, 10 frames.

* MDAnalysis: ``AtomGroup.center(masses, compound='residues', unwrap=...)`` in every frame
  (frames read from disk), then MDAnalysis ``InterRDF`` over those centres (an in-memory
  Universe of the centres with the frames' boxes);
* mdakit_fastrdf: ``InterRDF(w, w, compound='residues', center='mass', unwrap=...)``,
  which reads the frames and computes the centres with its vectorised ``CompoundCentres``
  (analysis/centres.py: bond trees built once, one minimum-image step per tree level per
  frame; MDAnalysis's arithmetic). Until 2026-11-25 this called MDAnalysis's ``center``.

A second table times the centres alone over the same frames: MDAnalysis's
``center(masses, compound='residues', unwrap=True)`` against ``CompoundCentres`` (plan
built once, its build time given apart), and compares them (largest difference, share of
centres equal bit for bit). The water is also wrapped into the box first
(``u.atoms.wrap()`` each frame: waters split across the faces), which is where unwrapping
has work to do; the XTC's waters are whole.

Times are process CPU time (all threads; the machine is shared, so CPU time is steadier
than wall time) per frame, the best of ``--repeat`` runs for mdakit_fastrdf and one run of
MDAnalysis (its InterRDF takes about 10 s a frame). The counts of both are compared.

    python benchmarks/bench_centres.py [--frames 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings

import MDAnalysis as mda
import numpy as np
from _common import best_of, describe
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF
from MDAnalysis.coordinates.memory import MemoryReader
from MDAnalysisTests.datafiles import TPR, XTC

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.analysis.centres import CompoundCentres

RDF = {"nbins": 75, "range": (0.0, 15.0), "exclusion_block": (1, 1)}


def mdanalysis_run(water, n_frames, unwrap):
    """CPU seconds of the centres and of MDAnalysis InterRDF over them, and its counts."""
    u = water.universe
    t0 = time.process_time()
    centres, boxes = [], []
    for ts in u.trajectory[:n_frames]:
        centres.append(water.center(water.masses, compound="residues", unwrap=unwrap))
        boxes.append(ts.dimensions.copy())
    t_centres = time.process_time() - t0
    centres = np.asarray(centres, dtype=np.float32)
    cu = mda.Universe.empty(centres.shape[1], trajectory=True)
    cu.load_new(centres, format=MemoryReader, dimensions=np.asarray(boxes))
    t0 = time.process_time()
    rdf = MDAInterRDF(cu.atoms, cu.atoms, **RDF).run()
    t_rdf = time.process_time() - t0
    return t_centres, t_rdf, rdf.results.count


def ours_run(water, n_frames, unwrap, repeat):
    best, rdf = best_of(lambda: InterRDF(water, water, compound="residues", center="mass",
                                         unwrap=unwrap, **RDF).run(stop=n_frames),
                        repeat, clock=time.process_time)
    return best, rdf.results.count


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    u = mda.Universe(TPR, XTC)
    water = u.select_atoms("resname SOL and not name MW")
    n = args.frames
    print(f"# {platform.node()} {describe(('MDAnalysis',))}")
    print(f"# command: python {' '.join(sys.argv)}")
    print(f"# {water.n_residues} residue centres of mass, {n} frames, 75 bins 0-15 Å, "
          "CPU time per frame (process, all threads)")
    print("| unwrap | MDAnalysis center (s/frame) | MDAnalysis InterRDF (s/frame) | "
          "MDAnalysis total (s/frame) | mdakit_fastrdf (s/frame) | speed-up | counts equal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for unwrap in (True, False):
        t_c, t_r, count_mda = mdanalysis_run(water, n, unwrap)
        t_ours, count = ours_run(water, n, unwrap, args.repeat)
        total = t_c + t_r
        same = bool(np.array_equal(count, count_mda))
        print(f"| {unwrap} | {t_c / n:.4f} | {t_r / n:.3f} | {total / n:.3f} | "
              f"{t_ours / n:.4f} | {total / t_ours:.1f}x | {same} |", flush=True)
    print()
    print("# centres alone (unwrap=True): CPU time per frame, ours the best call of all "
          "(--repeat per frame)")
    print("| positions | MDAnalysis center (s/frame) | CompoundCentres (s/frame) | "
          "plan build (s, once) | speed-up | max abs diff (Å) | bit-equal centres |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for wrap in (False, True):
        t_mda, t_ours, t_build, diff, equal = centres_run(water, n, wrap, args.repeat)
        print(f"| {'wrapped into the box' if wrap else 'as in the XTC'} | {t_mda:.4f} | "
              f"{t_ours:.5f} | {t_build:.4f} | {t_mda / t_ours:.0f}x | {diff:.1e} | "
              f"{equal:.4f} |", flush=True)


def centres_run(water, n_frames, wrap, repeat):
    """CPU seconds per frame of MDAnalysis's centres and of ours (best of `repeat`), the
    build of our plan, the largest difference and the share of centres equal bit for bit."""
    u = water.universe
    ours = CompoundCentres(water, "residues", "mass", True)
    t0 = time.process_time()
    ours.prepare()
    t_build = time.process_time() - t0
    t_mda, t_ours, diff, equal = 0.0, np.inf, 0.0, []
    for ts in u.trajectory[:n_frames]:
        if wrap:
            u.atoms.wrap()
        t0 = time.process_time()
        ref = water.center(water.masses, compound="residues", unwrap=True)
        t_mda += time.process_time() - t0
        for _ in range(repeat):
            t0 = time.process_time()
            got = ours()
            t_ours = min(t_ours, time.process_time() - t0)
        diff = max(diff, float(np.abs(got - ref).max()))
        equal.append(np.mean(got == ref))
    return t_mda / n_frames, t_ours, t_build, diff, float(np.mean(equal))


if __name__ == "__main__":
    main()
