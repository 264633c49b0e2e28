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

Both double rows give the same counts (checked here on every frame). Time per 10 frames,
best of ``--repeat``; the ratios are all double / double and double / single.

    python benchmarks/bench_double.py [--repeat 3]
"""

import argparse
import os
import platform
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
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
    edges = np.histogram([-1], bins=75, range=(0.0, 15.0))[1]
    n = len(ow)
    offsets = np.array([0, n], np.int64)
    pairs = np.array([[0, 0]], np.int32)

    def run(isa, threads, double, filt):
        h = K.CpuHistogrammer(threads, isa, "auto", 0, "rowmajor")
        h._double_filter = filt
        best, counts, settled = np.inf, None, 0
        for _ in range(args.repeat):
            out = np.zeros((len(frames), 75), np.uint64)
            settled = 0
            t0 = time.perf_counter()
            for f, (c, b) in enumerate(frames):
                h.accumulate(c, offsets, pairs, edges, b.kind, b.vectors, None, out[f:f + 1], double)
                settled += h.last_filter[1]
            best = min(best, time.perf_counter() - t0)
            counts = out
        return best, counts, settled, h.last_method

    print(f"# Double precision through the float filter, adk water O-O ({n} atoms, "
          f"{len(frames)} frames in memory, 75 bins, 0-15 Å)\n")
    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs; "
          f"variants {list(K.usable_variants())}; best of {args.repeat}\n")
    print("| variant | threads | single (ms) | double (ms) | all double (ms) | all double / double "
          "| double / single | pairs sent to double |")
    print("|---|---|---|---|---|---|---|---|")
    for isa in K.usable_variants():
        for threads in sorted({K.max_threads(), 1}, reverse=True):
            ts, _, _, _ = run(isa, threads, False, 1.0)
            td, cd, settled, _ = run(isa, threads, True, 1.0)
            ta, ca, _, _ = run(isa, threads, True, 0.0)
            if not np.array_equal(cd, ca):
                raise SystemExit(f"{isa}, {threads} threads: the filtered counts differ from all double")
            print(f"| {isa} | {threads} | {ts * 1e3:.1f} | {td * 1e3:.1f} | {ta * 1e3:.1f} | "
                  f"{ta / td:.2f} | {td / ts:.2f} | {settled:,} |", flush=True)


if __name__ == "__main__":
    main()
