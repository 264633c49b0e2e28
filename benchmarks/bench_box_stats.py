"""Per-frame host cost of the box statistics (issue 26: ``results.rho``, the half-width
check): InterRDF with them, and the same class with the base's ``_frame_box`` (no box
statistics), alternated run by run, best of ``--repeat``, thread CPU time per frame.

Cases: 64 water oxygens of the adk demo (a pressure-coupled box that changes every frame:
volume and widths recomputed each frame) and the same frames with the box of frame 0
(a fixed box: the cached values are reused). MDAnalysis's InterRDF of the same atoms is
timed in the same run as the peer tool.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import MDAnalysis as mda
import numpy as np
from _common import cpu_model
from MDAnalysis.analysis import rdf as mda_rdf
from MDAnalysisTests.datafiles import TPR, XTC

import mdakit_fastrdf
from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.analysis.base import PairHistogramBase


class NoBoxStatistics(InterRDF):
    """InterRDF without the per-frame box statistics (the base's frame box)."""

    _frame_box = PairHistogramBase._frame_box


def thread_time(fn):
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--frames", type=int, default=200, help="frames (the 10 of the "
                        "demo repeated)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    u = mda.Universe(TPR, XTC, in_memory=True)
    ow = u.select_atoms("name OW")[:64]
    pos = u.trajectory.coordinate_array[:, ow.ix]
    dims = np.array([ts.dimensions for ts in u.trajectory])
    reps = -(-args.frames // len(pos))
    pos = np.tile(pos, (reps, 1, 1))[:args.frames]
    npt = np.tile(dims, (reps, 1))[:args.frames]
    fixed = np.tile(dims[:1], (args.frames, 1))
    systems = {}
    for name, d in (("changing box (NPT)", npt), ("fixed box", fixed)):
        v = mda.Merge(ow)
        v.load_new(pos.copy(), format="MEMORY", dimensions=d)
        systems[name] = v
    kw = {"nbins": 75, "range": (0.0, 15.0), "exclusion_block": (1, 1), "n_threads": 1}
    print(f"# bench_box_stats: mdakit_fastrdf from {mdakit_fastrdf.__file__}")
    print(f"# {cpu_model()}, 64 atoms, {args.frames} frames "
          f"in memory, 1 thread, thread CPU time, best of {args.repeat} (alternated), "
          f"load {os.getloadavg()[0]:.1f}")
    print("| box | with box statistics (µs/frame) | without (µs/frame) | overhead (µs/frame) "
          "| ratio with/without | MDAnalysis InterRDF (µs/frame) | MDAnalysis / with |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, v in systems.items():
        g = v.atoms
        runs = {
            "with": lambda g=g: InterRDF(g, g, **kw).run(),
            "without": lambda g=g: NoBoxStatistics(g, g, **kw).run(),
            "mda": lambda g=g: mda_rdf.InterRDF(g, g, nbins=75, range=(0.0, 15.0),
                                                exclusion_block=(1, 1)).run(),
        }
        best = {}
        for fn in runs.values():
            fn()  # warm up
        for _ in range(args.repeat):
            for key, fn in runs.items():
                best[key] = min(best.get(key, np.inf), thread_time(fn))
        per = {k: 1e6 * t / args.frames for k, t in best.items()}
        print(f"| {name} | {per['with']:.1f} | {per['without']:.1f} | "
              f"{per['with'] - per['without']:.1f} | {per['with'] / per['without']:.3f} | "
              f"{per['mda']:.1f} | {per['mda'] / per['with']:.1f} |")


if __name__ == "__main__":
    main()
