"""Where the GPU float filter's time goes: the loop against the settles (a diagnostic).

Times one 1M x 1M frame (10,000 bins; no box 0-175 Å and the triclinic benchmark cell 0-35 Å,
as in ``bench_gpu.py kernel``) in single precision, then in double precision through the
filter with the filter's bound scaled by ``s`` (``_double_filter``: 1 is the real bound; below
1 the bound is too small, so the counts are NOT exact -- a timing probe only), and all in
double. The time against the share of pairs settled is a line: its intercept is the loop with
the flag (no settles), its slope the cost of one settled pair, both in units of the
single-precision frame time.

    python benchmarks/gpu_micro/filter_slope.py [--n 1000000] [--repeat 3]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bench_gpu import BOXES, problem, time_frames

from mdakit_fastrdf.engine import Engine


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--bins", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.125, 1e-6])
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    print("| box | run | s/frame | x single | bound (bins) | settled % |")
    print("|---|---|---|---|---|---|")
    for name in ("none", "triclinic"):
        dims, rmax = BOXES[name]
        a, out = problem(rng, (args.n, args.n), [(0, 1)], args.bins, rmax, dims)
        t1 = time_frames(Engine("cuda", "single"), a, args.repeat, out)
        print(f"| {name} | single | {t1:.4f} | 1.00 | - | - |", flush=True)
        pts = []
        for s in args.scales + [0.0]:
            eng = Engine("cuda", "double")
            eng._impl = eng._make_impl(a[1], a[2])
            eng._impl._double_filter = s
            t = time_frames(eng, a, args.repeat, out)
            launch = eng.last_launch
            d = launch.get("filter_delta", -1.0)
            settled = 100.0 * launch.get("settled", 0) / float(args.n) ** 2 if d >= 0 else float("nan")
            label = "all double" if s == 0.0 else f"filter x{s:g}"
            print(f"| {name} | {label} | {t:.4f} | {t1 / t:.2f} | {d:.3g} | {settled:.3f} |",
                  flush=True)
            if s > 0.0 and d >= 0:
                pts.append((settled, t / t1))
        if len(pts) >= 2:
            x, y = np.array(pts).T
            slope, icept = np.polyfit(x, y, 1)
            print(f"| {name} | fit: time/single = {icept:.3f} + {slope:.3f} x settled% "
                  f"(loop alone x{1 / icept:.2f}) | | | | |", flush=True)


if __name__ == "__main__":
    main()
