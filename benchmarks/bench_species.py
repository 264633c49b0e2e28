"""All partial RDFs of a system: SpeciesRDF against looping MDAnalysis's InterRDF over the
species pairs, in the same run.

Sections:

``adk`` (default)
    MDAnalysisTests' adenylate kinase in water (TPR/XTC, 47,681 atoms, triclinic box):
    every element pair (7 species incl. TIP4P's element-less virtual sites, 28 partials),
    75 bins, 0-15 Å. SpeciesRDF (one kernel call per frame, single and double precision)
    against ``MDAnalysis.analysis.rdf.InterRDF`` run once per species pair; SpeciesRDF with
    ``method='auto'`` (cell lists here) and ``'allpairs'``. The MDAnalysis
    loop is slow, so it may be timed on fewer frames (``--mda-frames``) and compared per
    frame; the table says so. The double-precision counts are checked equal to MDAnalysis's
    on the frames both ran.
``generated``
    CADISHI's F1-ATPase-like case: 300,000 atoms in 9 species (150k ... 300 atoms), 45
    partials, 8000 bins, r_max 300 Å, no box, through SpeciesRDF (``--device cuda`` on the
    GPU machine). No MDAnalysis reference (it would take hours per frame).

Usage::

    python benchmarks/bench_species.py                       # adk, 3 frames, MDAnalysis on 1
                                                             # (methods auto and allpairs)
    python benchmarks/bench_species.py adk --frames 10 --mda-frames 2
    python benchmarks/bench_species.py generated --device cuda --frames 5
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
from _common import describe


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = "  ".join(f"{h:>{w}}" for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(f"{c!s:>{w}}" for c, w in zip(r, widths)))


def pairs_per_frame(sizes, pairs):
    return sum(sizes[a] * (sizes[a] - 1) // 2 if a == b else sizes[a] * sizes[b]
               for a, b in pairs)


def section_adk(args):
    import MDAnalysis as mda
    from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import SpeciesRDF

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = mda.Universe(TPR, XTC)
    kw = dict(nbins=75, range=(0.0, 15.0))
    rows = []
    res = {}
    for method in args.methods.split(","):
        for precision in ("single", "double"):
            s = SpeciesRDF(u.atoms, by="element", precision=precision, device=args.device,
                           n_threads=args.threads, method=method, **kw)
            s.run(stop=1)  # warm-up (thread pool, first-frame set-up)
            t0 = time.perf_counter()
            s.run(stop=args.frames)
            t = (time.perf_counter() - t0) / args.frames
            res[method, precision] = (s, t)
    s = next(iter(res.values()))[0]
    sizes = [int(v) for v in s.results.n_atoms]
    npairs = pairs_per_frame(sizes, s.results.pairs)

    # MDAnalysis: one InterRDF per species pair (what one writes without SpeciesRDF).
    t0 = time.perf_counter()
    counts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, b in s.results.pairs:
            r = MDAInterRDF(s.groups[a], s.groups[b], **kw).run(stop=args.mda_frames)
            counts.append(r.results.count)
    t_mda = (time.perf_counter() - t0) / args.mda_frames
    check = SpeciesRDF(u.atoms, by="element", precision="double", n_threads=args.threads,
                       **kw).run(stop=args.mda_frames)
    equal = all(np.array_equal(c, check.results.count[k]) for k, c in enumerate(counts))

    timings = [(f"MDAnalysis InterRDF x {len(s.results.pairs)} pairs", t_mda, args.mda_frames)]
    for (method, precision), (r, t) in res.items():
        timings.append((f"SpeciesRDF {precision}, method={method} "
                        f"({r._engine.device_used}: {r._engine.last_method})", t, args.frames))
    for name, t, frames in timings:
        rows.append([name, frames, f"{t:.3f}", f"{npairs / t / 1e9:.3f}", f"{t_mda / t:.1f}x"])
    table(f"adk in water by element: {len(sizes)} species {sizes}, {len(s.results.pairs)} "
          f"partials, 75 bins, 0-15 Å, triclinic box, {npairs:.3g} atom pairs per frame "
          f"(all pairs; MDAnalysis's grid search visits only those within 15 Å)",
          ["method", "frames", "s/frame", "all-pairs bapps", "speed-up vs MDAnalysis"], rows)
    if args.mda_frames != args.frames:
        print(f"(MDAnalysis timed on {args.mda_frames} frame(s), SpeciesRDF on {args.frames}; "
              f"compared per frame)")
    print(f"double-precision partials equal to MDAnalysis's on {args.mda_frames} frame(s): "
          f"{equal}")


def section_generated(args):
    import MDAnalysis as mda
    from MDAnalysis.coordinates.memory import MemoryReader

    from mdakit_fastrdf import SpeciesRDF

    sizes = [150_000, 80_000, 40_000, 15_000, 8_000, 4_000, 2_000, 700, 300]
    sizes = [max(1, int(round(v * args.scale))) for v in sizes]
    n = sum(sizes)
    rng = np.random.default_rng(1)
    frames = max(1, args.frames)
    # positions in a 150 Å cube: every pair lies within r_max = 300 Å (CADISHI's F1-ATPase
    # scale); no box.
    coords = rng.uniform(0.0, 150.0, size=(frames + 1, n, 3)).astype(np.float32)
    u = mda.Universe.empty(n, trajectory=True)
    u.add_TopologyAttr("names", np.repeat([f"S{k}" for k in range(9)], sizes))
    u.load_new(coords, format=MemoryReader)
    rows = []
    npairs = None
    for precision in ("single", "double"):
        if precision == "double" and not args.double:
            continue
        s = SpeciesRDF(u.atoms, by="name", nbins=8000, range=(0.0, 300.0), norm="density",
                       precision=precision, device=args.device, n_threads=args.threads)
        s.run(stop=1)  # warm-up
        t0 = time.perf_counter()
        s.run(start=1, stop=frames + 1)
        t = (time.perf_counter() - t0) / frames
        if npairs is None:
            npairs = pairs_per_frame(list(s.results.n_atoms), s.results.pairs)
        total = int(s.results.count_uint64.sum())
        # double: speed relative to single (issue 27: >= 0.8 on the GPU), and the pairs the
        # float filter settled in double (GPU: last_launch of the last frame's synchronize)
        ratio = f"{rows[0][-1] / t:.2f}" if rows and precision == "double" else "-"
        launch = getattr(s._engine, "last_launch", None) or {}
        settled = launch.get("settled")
        note = launch.get("rule", "-")
        if precision == "double" and settled is not None and launch.get("filter_delta", -1) >= 0:
            note += (f" (bound {launch['filter_delta']:.2g} bins, settled "
                     f"{settled / (npairs * frames):.2%} of the pairs)")
        rows.append([s._engine.device_used, precision, frames, f"{t * 1e3:.1f}",
                     f"{1 / t:.2f}", f"{npairs / t / 1e9:.1f}", total, ratio, note, t])
    table(f"Generated: {n:,} atoms, 9 species {sizes}, 45 partials, 8000 bins, "
          f"r_max 300 Å, no box ({npairs:.3g} atom pairs per frame), through SpeciesRDF",
          ["device", "precision", "frames", "ms/frame", "frames/s", "bapps", "counts",
           "speed vs single", "rule"], [r[:-1] for r in rows])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("section", nargs="?", default="adk", choices=["adk", "generated"])
    p.add_argument("--frames", type=int, default=3, help="frames for SpeciesRDF")
    p.add_argument("--mda-frames", type=int, default=1, help="frames for the MDAnalysis loop")
    p.add_argument("--device", default="auto", help="SpeciesRDF device (auto, cpu, cuda)")
    p.add_argument("--methods", default="auto,allpairs",
                   help="adk: SpeciesRDF pair methods to time, comma-separated")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    p.add_argument("--double", action="store_true", help="generated: also double precision")
    p.add_argument("--scale", type=float, default=1.0,
                   help="generated: scale the species sizes (e.g. 0.02 for a CPU smoke test)")
    args = p.parse_args(argv)
    print(f"$ python {' '.join(sys.argv)}")
    print(describe())
    {"adk": section_adk, "generated": section_generated}[args.section](args)


if __name__ == "__main__":
    main()
