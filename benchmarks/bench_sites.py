"""InterRDF_s on the issue-38 case, against MDAnalysis's InterRDF_s in the same run: where the time goes.

The groups of issue 38 (item 10) on MDAnalysisTests' TPR/XTC (adk in water, a rhombic
dodecahedron), ``nbins=75, range=(0, 15)`` (the defaults), the first 5 frames read from the
XTC file::

    ags = [[ow[:100], ow[:3000]], [na, ow]]   # (100 x 3,000) + (4 x 11,084) site pairs

Printed, each a table:

1. **warm**: both ``run(stop=5)`` in this process, interleaved, best of ``--repeat``, split
   into the per-frame part (``_single_frame``: reading is outside it), ``_conclude``
   (normalisation: ``results.rdf = count / norm``) and the rest (reading the frames,
   allocation, set-up), with the minor page faults of the run (``ru_minflt``);
2. **cold**: the first ``run(stop=5)`` of a fresh Python process (what a script that runs
   once pays), ``--cold`` processes per package, alternating, median and range of the
   wall time, and the CPU time of the run in user space and in the kernel (system: mostly
   the kernel handing the process fresh, zeroed memory for the result arrays);
3. **memory**: the bytes of ``results.count`` and ``results.rdf`` and the peak of the run
   (``tracemalloc``, which NumPy reports to);
4. **compact**: the same frames as by-group RDFs, ``InterRDF`` per pair of groups and one
   ``SpeciesRDF`` (Na+ and OW), whose results are ``n_pairs x nbins``; checked against the
   mean over the site pairs of ``InterRDF_s``.

Usage::

    python benchmarks/bench_sites.py [--repeat 5] [--cold 5] [--stop 5]

``--small`` runs groups ten times smaller (10 x 300 and 4 x 1,108) for a smoke test.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
import warnings

import numpy as np
from _common import best_of, cpu_model

COLD = r"""
import time, warnings
warnings.simplefilter("ignore")
import MDAnalysis as mda
from MDAnalysisTests.datafiles import TPR, XTC
from MDAnalysis.analysis import rdf as mda_rdf
from mdakit_fastrdf import InterRDF_s
u = mda.Universe(TPR, XTC)
ow = u.select_atoms("name OW"); na = u.select_atoms("resname NA+")
ags = [[ow[:100], ow[:3000]], [na, ow]] if not SMALL else [[ow[:10], ow[:300]], [na, ow[:1108]]]
cls = {"fastrdf": InterRDF_s, "MDAnalysis": mda_rdf.InterRDF_s}[WHICH]
import resource
r0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter(); cls(u, ags).run(stop=STOP); t = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(t, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime)
"""


def timed(cls):
    """A subclass of `cls` that adds up the time of ``_single_frame`` and ``_conclude``."""

    class Timed(cls):
        def _single_frame(self):
            t = time.perf_counter()
            super()._single_frame()
            self.t_frames += time.perf_counter() - t

        def _conclude(self):
            t = time.perf_counter()
            super()._conclude()
            self.t_conclude = time.perf_counter() - t

    Timed.t_frames = 0.0
    Timed.t_conclude = 0.0
    return Timed


def run_once(cls, u, ags, stop):
    analysis = cls(u, ags)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = time.perf_counter()
    analysis.run(stop=stop)
    total = time.perf_counter() - t
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return analysis, total, faults


def result_bytes(res):
    return sum(a.nbytes for a in res.count) + sum(a.nbytes for a in res.rdf)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold", type=int, default=5, help="fresh processes per package")
    parser.add_argument("--stop", type=int, default=5)
    parser.add_argument("--small", action="store_true",
                        help="groups ten times smaller (a smoke test, not the issue's case)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    import MDAnalysis as mda
    from MDAnalysis.analysis import rdf as mda_rdf
    from MDAnalysisTests.datafiles import TPR, XTC

    import mdakit_fastrdf
    from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF

    u = mda.Universe(TPR, XTC)
    ow = u.select_atoms("name OW")
    na = u.select_atoms("resname NA+")
    if args.small:
        ow = ow[:1108]
    ags = [[ow[:100], ow[:3000]], [na, ow]] if not args.small else [[ow[:10], ow[:300]],
                                                                    [na, ow]]
    stop = args.stop
    sizes = " + ".join(f"({len(a)} x {len(b)})" for a, b in ags)
    print(f"# bench_sites: InterRDF_s {sizes} site pairs, 75 bins to 15 Å, {stop} XTC frames")
    print(f"# mdakit_fastrdf {mdakit_fastrdf.__version__} from {mdakit_fastrdf.__file__}; "
          f"MDAnalysis {mda.__version__}; {cpu_model()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")

    # 1. warm, interleaved
    cases = {"fastrdf InterRDF_s": timed(InterRDF_s),
             "MDAnalysis InterRDF_s": timed(mda_rdf.InterRDF_s)}
    for cls in cases.values():  # warm up: first reads, first touch of the memory
        run_once(cls, u, ags, stop)
    best = {name: None for name in cases}
    for _ in range(args.repeat):
        for name, cls in cases.items():
            a, total, faults = run_once(cls, u, ags, stop)
            row = (total, a.t_frames, a.t_conclude, faults)
            if best[name] is None or total < best[name][0]:
                best[name] = row
    print(f"\n## 1. warm: run(stop={stop}) in one process, best of {args.repeat}\n")
    print("| case | run s | frames s | conclude s | rest s | page faults | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ref = best["MDAnalysis InterRDF_s"][0]
    for name, (total, frames, conclude, faults) in best.items():
        print(f"| {name} | {total:.3f} | {frames:.3f} | {conclude:.3f} | "
              f"{total - frames - conclude:.3f} | {faults} | {ref / total:.2f}x |")

    # 2. cold: a fresh process per run
    cold = {"fastrdf": [], "MDAnalysis": []}
    for _ in range(args.cold):
        for which in cold:
            code = (COLD.replace("WHICH", repr(which)).replace("SMALL", repr(args.small))
                    .replace("STOP", str(stop)))
            out = subprocess.run([sys.executable, "-c", code],
                                 capture_output=True, text=True, check=True)
            cold[which].append([float(v) for v in out.stdout.split()[-3:]])
    if args.cold:
        print(f"\n## 2. cold: the first run(stop={stop}) of a fresh process, {args.cold} "
              "each, alternating\n")
        print("| case | median s | min s | max s | user s (median) | system s (median) "
              "| ratio (medians) |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        ref = statistics.median(t for t, _, _ in cold["MDAnalysis"])
        for which, rows in cold.items():
            wall, user, system = (list(col) for col in zip(*rows))
            med = statistics.median(wall)
            print(f"| {which} InterRDF_s | {med:.3f} | {min(wall):.3f} | {max(wall):.3f} | "
                  f"{statistics.median(user):.3f} | {statistics.median(system):.3f} | "
                  f"{ref / med:.2f}x |")

    # 3. memory
    print("\n## 3. memory of one run\n")
    print("| case | results.count + results.rdf MB | peak traced MB |")
    print("| --- | --- | --- |")
    for name, cls in (("fastrdf InterRDF_s", InterRDF_s),
                      ("MDAnalysis InterRDF_s", mda_rdf.InterRDF_s)):
        tracemalloc.start()
        a = cls(u, ags).run(stop=stop)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"| {name} | {result_bytes(a.results) / 1e6:.1f} | {peak / 1e6:.1f} |")
        del a

    # 4. compact: by-group RDFs of the same frames
    site = InterRDF_s(u, ags).run(stop=stop)
    means = [r.mean(axis=(0, 1)) for r in site.results.rdf]
    del site
    compact = {
        "InterRDF per pair of groups (2 runs)":
            lambda: [InterRDF(a, b, precision="double").run(stop=stop) for a, b in ags],
        "SpeciesRDF(by={NA, OW}), Na+ and all its OW": lambda: SpeciesRDF(
            na + ags[1][1], by=[na, ags[1][1]], precision="double").run(stop=stop),
    }
    print(f"\n## 4. compact: by-group RDFs of the same frames, best of {args.repeat}\n")
    print("| case | run s | results MB | ratio to MDAnalysis InterRDF_s (warm) | check |")
    print("| --- | --- | --- | --- | --- |")
    ref = best["MDAnalysis InterRDF_s"][0]
    for name, fn in compact.items():
        t, out = best_of(fn, args.repeat, warmup=1)
        if isinstance(out, list):
            nbytes = sum(x.results.count.nbytes + x.results.rdf.nbytes for x in out)
            err = max(_rel(x.results.rdf, m) for x, m in zip(out, means))
            check = f"rdf = mean over site pairs, rel. diff {err:.1e}"
        else:
            res = out.results
            nbytes = sum(v.nbytes for v in res.values() if isinstance(v, np.ndarray))
            k = [tuple(map(int, p)) for p in res.pairs].index((0, 1))
            check = (f"Na-OW = mean over site pairs, rel. diff "
                     f"{_rel(res.rdf[k], means[1]):.1e}")
        print(f"| {name} | {t:.3f} | {nbytes / 1e6:.3f} | "
              f"{ref / t:.2f}x | {check} |")


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


if __name__ == "__main__":
    main()
