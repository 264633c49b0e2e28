"""GPU benchmark of mdakit_fastrdf's CUDA kernels, with the CPU kernel of the same machine.

Sections (each prints a table; ``--json FILE`` also writes every figure):

``kernel``
    bapps (billion atom pairs per second, CADISHI's unit) of one frame of two random groups
    of N atoms (N x N pairs), for N = 1M (and 4M with ``--big``), 1k / 10k / 40k / 100k bins,
    single precision, and three boxes: no box (positions in a 100 Å cube, range 0-175 Å: every
    pair is binned), an orthorhombic 100 Å cube (range 0-87 Å: every minimum-image pair is
    binned) and a triclinic cell of 100 Å edges and angles 60°, 60°, 90° (range up to just
    under half its smallest width, 35.4 Å, the single-image limit; the fraction in range is shown).
    The time is host to host: the coordinate copy, the kernels and the download of the
    counts. The CPU kernel (all cores) runs the same cases at N = 100k beside it. Without a
    box the whole cube lies within r_max, and in the orthorhombic box every minimum image,
    so the GPU takes its dense path (kernel column "dense": no range test); ``--rmax 170``
    (no box) or ``--rmax 80`` (orthorhombic) measures a frame where it cannot. Periodic
    frames are sorted in Morton order on the host ("sorted"); "1img" and "1idx" give the
    share of chunks of 32 j atoms that took one image, or (triclinic) one index, for all
    their pairs (``FASTRDF_CUDA_COMMON_IMAGE=off`` turns both off, to compare).
``species``
    CADISHI's use case: 300,000 atoms in 9 species of very different sizes, all 45 partial
    histograms in one call per frame, 8000 bins, r_max 300 Å, no box; frames/s.
``water``
    A 1M-atom box at the density of liquid water (310 Å), r_max 15 Å, 200 bins; frames/s of
    the all-pairs kernels (the cell-list kernels come later).
``adk``
    InterRDF's demo: water oxygens of MDAnalysisTests' adenylate kinase trajectory (TPR/XTC,
    11,084 atoms, 75 bins, 0-15 Å, exclusion (1, 1)), frames/s on CPU and GPU, trajectory
    in memory (needs MDAnalysis and the data files).
``crossover``
    Where ``device='auto'`` should switch: one species of N atoms with itself, per-frame time
    on the CPU (all cores) and on the GPU, from N = 200 upwards.

Usage::

    python benchmarks/bench_gpu.py                      # every section
    python benchmarks/bench_gpu.py kernel --big         # the kernel table with 4M x 4M too
    python benchmarks/bench_gpu.py --json $OUT/gpu.json

Needs a CUDA build of mdakit_fastrdf and a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from _common import best_of, cpu_model

from mdakit_fastrdf import build_info, cuda_devices
from mdakit_fastrdf.engine import NO_BOX, Box, Engine, prepare_box

CUBE = 100.0
BOXES = {
    "none": (None, 175.0),
    "ortho": ([CUBE, CUBE, CUBE, 90.0, 90.0, 90.0], 86.7),
    "triclinic": ([CUBE, CUBE, CUBE, 60.0, 60.0, 90.0], 35.0),
}


def edges_for(nbins, rmax, rmin=0.0):
    return np.histogram([-1], bins=nbins, range=(rmin, rmax))[1]


def positions(rng, n, dims):
    if dims is None:
        return (rng.random((n, 3)) * CUBE).astype(np.float32)
    from MDAnalysis.lib.mdamath import triclinic_vectors

    b = triclinic_vectors(np.asarray(dims, np.float32)).astype(np.float64)
    return (rng.random((n, 3)) @ b).astype(np.float32)


def time_frames(engine, args, repeat, out):
    """Median seconds per frame, host to host (accumulate + synchronize)."""
    t0 = time.perf_counter()
    engine.accumulate(*args, out)  # warm-up: allocations, task list, module load
    engine.synchronize()
    if time.perf_counter() - t0 > 5.0:
        repeat = 1  # slow case: one timed frame is enough
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        engine.accumulate(*args, out)
        engine.synchronize()
        times.append(time.perf_counter() - t0)
    time_frames.frames = 1 + len(times)  # frames accumulated into out
    return statistics.median(times)


def problem(rng, sizes, pairs, nbins, rmax, dims):
    n = int(sum(sizes))
    coords = positions(rng, n, dims)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
    box = Box(NO_BOX) if dims is None else prepare_box(dims)
    out = np.zeros((len(pairs), nbins), np.uint64)
    return (coords, offsets, pairs, edges_for(nbins, rmax), box, None), out


def count_pairs(sizes, pairs):
    total = 0
    for a, b in pairs:
        total += sizes[a] * (sizes[a] - 1) // 2 if a == b else sizes[a] * sizes[b]
    return total


class Table(list):
    """Rows printed as they are added (a long run still shows what it measured)."""

    def __init__(self, title, header):
        super().__init__()
        print(f"\n## {title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|", flush=True)

    def append(self, row):
        super().append(row)
        print("| " + " | ".join(str(c) for c in row) + " |", flush=True)


def section_kernel(rng, args, results):
    precisions = ("single", "double") if args.precision == "both" else (args.precision,)
    rows = Table(f"Kernel throughput, N x N pairs, {' and '.join(precisions)} precision (host to host)",
                 ["box", "N", "bins", "device", "precision", "kernel", "s/frame", "bapps",
                  "in range", "x CPU", "x single"])
    sizes_gpu = [1_000_000] + ([4_000_000] if args.big else [])
    bins_list = args.bins or [1000, 10_000, 40_000, 100_000]
    for box_name, (dims, rmax) in BOXES.items():
        if args.boxes and box_name not in args.boxes:
            continue
        rmax = args.rmax or rmax
        # CPU reference, same machine, smaller N (all-pairs throughput is size independent)
        ncpu = 100_000 if not args.no_cpu else 1000
        a, out = problem(rng, (ncpu, ncpu), [(0, 1)], 10_000, rmax, dims)
        t = time_frames(Engine("cpu", precisions[0]), a, 1, out)
        cpu_bapps = ncpu * ncpu / t / 1e9
        frac = out.sum() / (time_frames.frames * float(ncpu) * ncpu)
        rows.append([box_name, f"{ncpu:,}", "10,000", "cpu", precisions[0], "-", f"{t:.3f}",
                     f"{cpu_bapps:.1f}", f"{frac:.2f}", "1.0", "-"])
        results.append(dict(section="kernel", box=box_name, n=ncpu, nbins=10_000, device="cpu",
                            precision=precisions[0], seconds=t, bapps=cpu_bapps, in_range=frac))
        for n in sizes_gpu:
            for nbins in bins_list:
                if n > 1_000_000 and nbins != 10_000 and not args.full:
                    continue
                a, out = problem(rng, (n, n), [(0, 1)], nbins, rmax, dims)
                t_single = None
                for precision in precisions:  # the same frame in each precision
                    out[:] = 0
                    t_single = _kernel_row(rows, results, args, box_name, n, nbins, precision, a,
                                           out, cpu_bapps, t_single)
                del a, out


def _kernel_row(rows, results, args, box_name, n, nbins, precision, a, out, cpu_bapps, t_single):
    """One GPU row of the kernel table (the frame `a` in `precision`); returns the time of the
    single-precision row (this one's, or t_single), which a double row is compared with."""
    eng = Engine("cuda", precision, kernel=args.kernel, max_window_bins=args.max_window_bins)
    if precision == "double" and args.all_double:
        eng._impl = eng._make_impl(a[1], a[2])
        eng._impl._double_filter = 0.0  # every pair in double (the float filter off)
    t = time_frames(eng, a, args.repeat if n <= 1_000_000 else 1, out)
    bapps = n * n / t / 1e9
    launch = eng.last_launch
    kern = f"{launch['kernel']}x{launch['sweeps']} {launch['rule']} t{launch['threads']}"
    if launch.get("dense"):
        kern += " dense"  # every pair within r_max (host bound): no range test
    common, one_index, chunks = launch.get("image_chunks", (0, 0, 0))
    if launch.get("sorted"):
        kern += " sorted"  # periodic frame in spatial order
    if chunks:  # chunks of j atoms with one image, with one index (triclinic)
        kern += f" 1img {100.0 * common / chunks:.0f}%"
        if one_index:
            kern += f" 1idx {100.0 * one_index / chunks:.0f}%"
    if launch.get("filter_delta", -1.0) >= 0:  # double precision through the float filter
        settled = launch["settled"] / float(n * n)  # (the last frame's synchronize)
        kern += f" bound {launch['filter_delta']:.2g} settled {100.0 * settled:.2f}%"
    frac = float(out.sum()) / float(n * n) / time_frames.frames
    ratio = f"{t_single / t:.2f}" if t_single and precision == "double" else "-"
    rows.append([box_name, f"{n:,}", f"{nbins:,}", "cuda", precision, kern, f"{t:.3f}",
                 f"{bapps:.0f}", f"{frac:.2f}", f"{bapps / cpu_bapps:.0f}", ratio])
    results.append(dict(section="kernel", box=box_name, n=n, nbins=nbins, device="cuda",
                        precision=precision, kernel=launch, seconds=t, bapps=bapps,
                        in_range=frac))
    return t if precision == "single" else t_single


def section_species(rng, args, results):
    sizes = [150_000, 80_000, 40_000, 15_000, 8_000, 4_000, 2_000, 700, 300]
    pairs = [(a, b) for a in range(9) for b in range(a, 9)]
    a, out = problem(rng, sizes, pairs, 8000, 300.0, None)
    npairs = count_pairs(sizes, pairs)
    rows = Table(f"Species: 300,000 atoms, 9 species, 45 histograms, 8000 bins, r_max 300 Å, "
                 f"no box ({npairs:.3g} pairs per frame)",
                 ["device", "precision", "ms/frame", "frames/s", "bapps", "x single", "rule"])
    t_single = None
    for device, repeat in (("cuda", args.repeat), ("cpu", 1)):
        for precision in ("single", "double"):
            if device == "cpu" and precision == "double":
                continue
            eng = Engine(device, precision)
            t = time_frames(eng, a, repeat, out)
            launch = eng.last_launch or {}
            rule = launch.get("rule", "-")
            if launch.get("filter_delta", -1.0) >= 0:
                rule += (f" bound {launch['filter_delta']:.2g} settled "
                         f"{100.0 * launch['settled'] / npairs:.2f}%")
            ratio = f"{t_single / t:.2f}" if device == "cuda" and precision == "double" else "-"
            if device == "cuda" and precision == "single":
                t_single = t
            rows.append([device, precision, f"{t * 1e3:.1f}", f"{1 / t:.1f}",
                         f"{npairs / t / 1e9:.0f}", ratio, rule])
            results.append(dict(section="species", device=device, precision=precision,
                                seconds=t, fps=1 / t, bapps=npairs / t / 1e9))


def section_water(rng, args, results):
    n, side = 1_000_000, 310.0
    dims = [side, side, side, 90.0, 90.0, 90.0]
    a, out = problem(rng, (n,), [(0, 0)], 200, 15.0, dims)
    rows = Table("Water density, 1M atoms, 310 Å box, r_max 15 Å, 200 bins",
                 ["device", "method", "ms/frame", "frames/s"])
    for device in ("cuda",):
        eng = Engine(device, "single")
        t = time_frames(eng, a, args.repeat, out)
        rows.append([device, "all pairs", f"{t * 1e3:.1f}", f"{1 / t:.2f}"])
        results.append(dict(section="water", device=device, method="all pairs", seconds=t,
                            fps=1 / t))


def section_adk(rng, args, results):
    try:
        import MDAnalysis as mda
        from MDAnalysisTests.datafiles import TPR, XTC
    except ImportError:
        print("\n(adk section skipped: MDAnalysis or MDAnalysisTests missing)")
        return
    from MDAnalysis.coordinates.memory import MemoryReader  # noqa: F401

    from mdakit_fastrdf import InterRDF

    u = mda.Universe(TPR, XTC, in_memory=True)
    ow = u.select_atoms("name OW")
    rows = Table(f"adk OW-OW, {len(ow)} atoms, {u.trajectory.n_frames} frames in memory, 75 bins",
                 ["device", "precision", "s (all frames)", "frames/s"])
    for device in ("cpu", "cuda"):
        for precision in ("single", "double"):
            kw = dict(nbins=75, range=(0.0, 15.0), exclusion_block=(1, 1), device=device,
                      precision=precision)
            InterRDF(ow, ow, **kw).run(stop=2)  # warm-up
            best, _ = best_of(lambda: InterRDF(ow, ow, **kw).run(), args.repeat)
            fps = u.trajectory.n_frames / best
            rows.append([device, precision, f"{best:.3f}", f"{fps:.0f}"])
            results.append(dict(section="adk", device=device, precision=precision,
                                seconds=best, fps=fps))


def section_crossover(rng, args, results):
    rows = Table("device='auto' crossover: one species with itself, 75 bins, 50 Å box, r_max 15 Å",
                 ["N", "pairs", "CPU ms", "GPU ms", "faster"])
    for n in (200, 500, 1000, 1500, 2000, 3000, 5000, 10_000, 20_000):
        a, out = problem(rng, (n,), [(0, 0)], 75, 15.0, [50.0, 50.0, 50.0, 90.0, 90.0, 90.0])
        tc = time_frames(Engine("cpu"), a, 20, out)
        tg = time_frames(Engine("cuda"), a, 20, out)
        pairs = n * (n - 1) // 2
        rows.append([f"{n:,}", f"{pairs:.3g}", f"{tc * 1e3:.3f}", f"{tg * 1e3:.3f}",
                     "cuda" if tg < tc else "cpu"])
        results.append(dict(section="crossover", n=n, pairs=pairs, cpu_s=tc, cuda_s=tg))


SECTIONS = {"kernel": section_kernel, "species": section_species, "water": section_water,
            "adk": section_adk, "crossover": section_crossover}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sections", nargs="*", help=f"any of {', '.join(SECTIONS)} (default: all)")
    p.add_argument("--big", action="store_true", help="also 4M x 4M pairs (10k bins)")
    p.add_argument("--full", action="store_true", help="with --big: every bin count")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--bins", type=int, nargs="*", help="kernel section: bin counts to run")
    p.add_argument("--boxes", nargs="*", help=f"kernel section: boxes to run ({', '.join(BOXES)})")
    p.add_argument("--no-cpu", action="store_true", help="kernel section: skip the CPU reference")
    p.add_argument("--precision", choices=("single", "double", "both"), default="single",
                   help="kernel section: the precision of the kernels (default single; both: "
                        "each frame in single, then double, with the ratio)")
    p.add_argument("--all-double", action="store_true",
                   help="kernel section: double precision with every pair in double (the float "
                        "filter off), to compare")
    p.add_argument("--rmax", type=float, default=None,
                   help="kernel section: this range instead of each box's (e.g. 170 without a "
                        "box: below the cube's diagonal, so not every pair is in range)")
    p.add_argument("--kernel", default="auto", help="kernel section: auto, shared or global")
    p.add_argument("--max-window-bins", type=int, default=0,
                   help="kernel section: cap on the bins of one shared-memory sweep")
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args(argv)
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    devs = cuda_devices()
    if not devs:
        sys.exit("no usable CUDA device")
    info = build_info()
    print(f"# mdakit_fastrdf {info['version']} GPU benchmark, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"GPU: {devs[0]['name']} ({devs[0]['multiprocessors']} SMs), CPU: {cpu_model()}, "
          f"{os.cpu_count()} cores, CPU kernel {info['cpu_isa_selected']} x {info['max_threads']} threads")
    rng = np.random.default_rng(12345)
    results = []
    for name in args.sections or list(SECTIONS):
        SECTIONS[name](rng, args, results)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(gpu=devs[0], build=info, results=results), fh, indent=1, default=str)


if __name__ == "__main__":
    main()
