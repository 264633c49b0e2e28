"""Double precision on the CPU: through the float filter against every pair in double.

The water oxygens of MDAnalysisTests' adenylate kinase trajectory (11,084 atoms, 10 frames
held in memory, wrapped into the box, 75 bins over 0-15 Å, triclinic box, cell lists as
``method='auto'`` picks them), one call of the compiled kernel per frame, for every SIMD
variant this CPU runs and for all threads and one thread:

* ``single``: single precision (float32 distances);
* ``double``: double precision, the default way: every pair in float32, the pairs within the
  filter's bound of a bin edge again in float64 (``CpuHistogrammer.last_filter`` gives the
  bound and the number of pairs sent to double);
* ``all double``: double precision with the filter off (``_double_filter = 0``), every pair
  in float64: the kernel before 2026-11-24.

Both double rows give the same counts (checked here on every frame). The three runs take
turns frame by frame (in alternating order), each frame ``--repeat`` times; a time is the
sum over the frames of each frame's best, which keeps bursts of load on a shared machine
out of the figures. ``--clock cpu`` times the process's CPU time instead of the wall clock
(for one thread on a loaded machine: time spent waiting for a core does not count; with
several threads the pool's waiting threads may count). The ratios are all double / double
and double / single.

``--bins``, ``--rmax`` and ``--method`` vary the case (fine bins send more pairs to double;
``allpairs`` times the all-pairs path, whose rows hold mostly pairs out of range).

    python benchmarks/bench_double.py [--repeat 5] [--variants avx2] [--threads 1]
    python benchmarks/bench_double.py --bins 3000 --method allpairs --clock cpu --threads 1
"""

import argparse
import os
import time

import numpy as np
from _common import cpu_model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of every frame (best kept)")
    ap.add_argument("--variants", nargs="+", default=None,
                    help="SIMD variants (default: every one this CPU runs)")
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="thread counts (default: all and 1)")
    ap.add_argument("--bins", type=int, default=75)
    ap.add_argument("--rmax", type=float, default=15.0)
    ap.add_argument("--method", default="auto", choices=["auto", "allpairs", "cells"])
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"])
    args = ap.parse_args(argv)

    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    import mdakit_fastrdf.engine._fastrdf_cpu as K
    from mdakit_fastrdf.engine import prepare_box, wrap_positions

    u = mda.Universe(TPR, XTC, in_memory=True)
    ow = u.select_atoms("name OW")
    frames = []
    for _ in u.trajectory:
        c = np.ascontiguousarray(ow.positions.astype(np.float32))
        b = prepare_box(u.dimensions)
        wrap_positions(c, b)
        frames.append((c, b))
    nb = args.bins
    edges = np.histogram([-1], bins=nb, range=(0.0, args.rmax))[1]
    n = len(ow)
    offsets = np.array([0, n], np.int64)
    pairs = np.array([[0, 0]], np.int32)
    clock = time.perf_counter if args.clock == "wall" else time.process_time

    def run(isa, threads):
        """Times of single, double and all double (the sum over frames of each frame's best),
        the counts of both doubles, the pairs sent to double and the method taken."""
        hs = []
        for double, filt in ((False, 1.0), (True, 1.0), (True, 0.0)):
            h = K.CpuHistogrammer(threads, isa, args.method, 0, "rowmajor")
            h._double_filter = filt
            hs.append((h, double))
        best = np.full((3, len(frames)), np.inf)
        counts = np.zeros((3, len(frames), nb), np.uint64)
        settled = 0
        for r in range(args.repeat):
            for f, (c, b) in enumerate(frames):
                order = range(3) if (r + f) % 2 == 0 else range(2, -1, -1)
                for m in order:
                    h, double = hs[m]
                    out = np.zeros((1, nb), np.uint64)
                    t0 = clock()
                    h.accumulate(c, offsets, pairs, edges, b.kind, b.vectors, None, out, double)
                    best[m, f] = min(best[m, f], clock() - t0)
                    if r == 0:
                        counts[m, f] = out[0]
                        if m == 1:
                            settled += h.last_filter[1]
        return best.sum(axis=1), counts, settled, hs[1][0].last_method

    print(f"# Double precision through the float filter, adk water O-O ({n} atoms, "
          f"{len(frames)} frames in memory, {nb} bins, 0-{args.rmax:g} Å, method {args.method})\n")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; "
          f"variants {list(K.usable_variants())}; {args.clock} clock, per frame the best of "
          f"{args.repeat}, summed over the frames; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| variant | threads | path | single (ms) | double (ms) | all double (ms) "
          "| all double / double | double / single | pairs sent to double |")
    print("|---|---|---|---|---|---|---|---|---|")
    variants = args.variants or list(K.usable_variants())
    threads_list = args.threads or sorted({K.max_threads(), 1}, reverse=True)
    for isa in variants:
        for threads in threads_list:
            (ts, td, ta), counts, settled, method = run(isa, threads)
            if not np.array_equal(counts[1], counts[2]):
                raise SystemExit(f"{isa}, {threads} threads: the filtered counts differ from all double")
            print(f"| {isa} | {threads} | {method} | {ts * 1e3:.1f} | {td * 1e3:.1f} | {ta * 1e3:.1f} | "
                  f"{ta / td:.2f} | {td / ts:.2f} | {settled:,} |", flush=True)


if __name__ == "__main__":
    main()
