"""Cell lists: linear scaling, cell size and order, and the all-pairs / cells choice.

Generated systems at the number density of water oxygens (0.0334 Å^-3) in cubic periodic
boxes, one species with itself, ``rmax`` 15 Å, ``--bins`` bins (200). Times are per frame
for one call of the engine with the coordinates already in memory (best of ``--repeat``),
so they show the kernels, not the trajectory reader.

Sections (``--sections``, comma separated):

``scaling``
    N = 10k ... 1M (``--sizes``): frames/s and ns per atom of ``method='cells'`` (and
    freud's RDF on the same frame, same run), and the log-log slope of time against N.
``cells``
    Cell side rmax / k for k = 1, 2, 3 and the column orders row-major, Morton and Hilbert
    at ``--cells-sizes`` atoms.
``choice``
    All pairs against cells for small systems and long ``rmax``, and what ``method='auto'``
    picks: the check of the cost model in ``csrc/cpu/cell_grid.cpp``.
``boxes``
    A cube, a rhombic dodecahedron (60°, 60°, 90°) and a truncated octahedron (70.53°,
    109.47°, 70.53°) at ``--cells-sizes`` atoms, single and double precision (on the CPU also
    double with the float filter off: every pair in double), with a checksum
    of the counts and (CPU) the blocks of 16 j atoms that took one image for a whole cell
    (``last_block_images``: own, one shift, shift 0). Run it with an older build on the
    same machine to compare.
``images``
    3,000 atoms in a small rhombic dodecahedron and truncated octahedron with r_max 0.45 of
    the box length (above half the smallest width: the extra lattice images are tried for
    every pair), all pairs and cells, both precisions.

``--device cuda`` runs the same on a GPU (``--sizes 1000000,2000000,4000000,8000000`` is
the GPU run of issue 10).

Usage::

    python benchmarks/bench_cells.py                       # all sections on the CPU
    python benchmarks/bench_cells.py --sections scaling --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time

import numpy as np
from _common import cpu_model

import mdakit_fastrdf
from mdakit_fastrdf import build_info
from mdakit_fastrdf.engine import Engine, prepare_box

try:
    import freud
except ImportError:
    freud = None

DENSITY = 0.0334  # water oxygens per Å^3


def table(headers, rows):
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join(" --- " for _ in headers) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |", flush=True)
    print()


def water_box(n: int, seed: int = 1):
    """n random positions at water-oxygen density in a cube; returns coords, dimensions."""
    side = (n / DENSITY) ** (1.0 / 3.0)
    rng = np.random.default_rng(seed)
    coords = (rng.random((n, 3)) * side).astype(np.float32)
    return coords, np.array([side, side, side, 90.0, 90.0, 90.0], dtype=np.float32)


class Frame:
    def __init__(self, n, nbins, rmax, seed=1):
        self.n = n
        self.coords, self.dims = water_box(n, seed)
        self.box = prepare_box(self.dims)
        self.offsets = np.array([0, n], np.int64)
        self.pairs = np.array([[0, 0]], np.int32)
        self.edges = np.linspace(0.0, rmax, nbins + 1)
        self.rmax = rmax


def time_engine(frame: Frame, engine: Engine, repeat: int):
    """Seconds per frame: best of `repeat` single frames on the CPU; on a GPU the mean over
    `repeat` frames queued back to back (the host packs a frame while the GPU runs the last)."""
    out = np.zeros((1, len(frame.edges) - 1), np.uint64)
    engine.accumulate(frame.coords, frame.offsets, frame.pairs, frame.edges, frame.box, None, out)
    engine.synchronize()  # warm-up (and GPU set-up)
    if engine.device.startswith("cuda"):
        out[:] = 0
        t0 = time.perf_counter()
        for _ in range(repeat):
            engine.accumulate(frame.coords, frame.offsets, frame.pairs, frame.edges, frame.box, None, out)
        engine.synchronize()
        t = (time.perf_counter() - t0) / repeat
        single = out // np.uint64(repeat)
        th = time.perf_counter()
        engine.accumulate(frame.coords, frame.offsets, frame.pairs, frame.edges, frame.box, None, out)
        tq = time.perf_counter()
        engine.synchronize()
        ts = time.perf_counter()
        print(f"  ... one frame alone: host part (pack, queue) {(tq - th) * 1e3:.2f} ms, "
              f"then copy + sort + kernel + counts {(ts - tq) * 1e3:.2f} ms", file=sys.stderr)
        return t, single, engine.last_method
    best = np.inf
    for _ in range(repeat):
        out[:] = 0
        t0 = time.perf_counter()
        engine.accumulate(frame.coords, frame.offsets, frame.pairs, frame.edges, frame.box, None, out)
        engine.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out.copy(), engine.last_method


def time_freud(frame: Frame, threads: int, repeat: int):
    freud.parallel.set_num_threads(threads)
    box = freud.box.Box.cube(float(frame.dims[0]))
    best = np.inf
    for _ in range(repeat):
        rdf = freud.density.RDF(bins=len(frame.edges) - 1, r_max=frame.rmax)
        t0 = time.perf_counter()
        rdf.compute(system=(box, frame.coords))
        best = min(best, time.perf_counter() - t0)
    return best


def section_scaling(args):
    precisions = ("single", "double") if args.precision == "both" else (args.precision,)
    print(f"## Scaling: water-density cubes, rmax {args.rmax:g} Å, {args.bins} bins, "
          f"method='cells', {args.device}, {' and '.join(precisions)} precision\n")
    rows, ns, ts = [], [], []
    for n in args.sizes:
        fr = Frame(n, args.bins, args.rmax)
        t_single = None
        for precision in precisions:  # the same frame in each precision
            eng = Engine(args.device, precision, args.threads, method="cells")
            t, out, _ = time_engine(fr, eng, args.repeat)
            in_range = int(out.sum())
            ratio = f"{t_single / t:.2f}" if t_single and precision == "double" else "-"
            t_single = t if precision == "single" else t_single
            launch = getattr(eng._impl, "last_launch", None) or {}
            rule = launch.get("rule", "-")
            if launch.get("filter_delta", -1.0) >= 0:
                rule += f" (bound {launch['filter_delta']:.2g})"
            row = [f"{n:,}", f"{fr.dims[0]:.1f}", precision, f"{t * 1e3:.2f}", f"{1 / t:.3g}",
                   f"{t / n * 1e9:.1f}", f"{in_range / t / 1e9:.2f}", ratio, rule]
            if freud is not None and args.freud and args.device == "cpu":
                tf = time_freud(fr, args.threads or 0, max(1, args.repeat // 2))
                row += [f"{tf * 1e3:.1f}", f"{tf / t:.1f}"]
            else:
                row += ["n/a", "n/a"]
            rows.append(row)
            if precision == precisions[0]:
                ns.append(n)
                ts.append(t)
            print(f"  ... N={n:,} {precision}: {t * 1e3:.2f} ms", file=sys.stderr, flush=True)
    table(["N", "box (Å)", "precision", "ms/frame", "frames/s", "ns/atom", "G in-range pairs/s",
           "x single", "rule", "freud ms", "speed-up vs freud"], rows)
    if len(ns) > 1:
        slope = np.polyfit(np.log(ns), np.log(ts), 1)[0]
        print(f"log-log slope of time against N ({ns[0]:,} to {ns[-1]:,}): **{slope:.3f}**\n")


def section_cells(args):
    print(f"## Cell side and column order: rmax {args.rmax:g} Å, {args.bins} bins, {args.device}\n")
    for n in args.cells_sizes:
        fr = Frame(n, args.bins, args.rmax)
        rows = []
        ref = None
        for k in (1, 2, 3):
            for order in ("rowmajor", "morton", "hilbert"):
                eng = Engine(args.device, args.precision, args.threads, method="cells",
                             cells_per_cutoff=k, cell_order=order)
                t, out, _ = time_engine(fr, eng, args.repeat)
                ref = out if ref is None else ref
                same = "yes" if np.array_equal(out, ref) else "NO"
                rows.append([f"{n:,}", f"rmax/{k}", order, f"{t * 1e3:.2f}", f"{1 / t:.3g}", same])
                print(f"  ... N={n:,} k={k} {order}: {t * 1e3:.2f} ms", file=sys.stderr, flush=True)
        best = min(rows, key=lambda r: float(r[3]))
        table(["N", "cell side", "column order", "ms/frame", "frames/s", "same counts"], rows)
        print(f"fastest at N={n:,}: side {best[1]}, {best[2]}\n")


def section_choice(args):
    print(f"## All pairs or cells: what method='auto' picks ({args.device})\n")
    rows = []
    for n, rmax in ((500, 15.0), (2000, 15.0), (5000, 15.0), (11084, 15.0), (20000, 15.0),
                    (5000, 6.0), (20000, 40.0), (50000, 10.0)):
        fr = Frame(n, args.bins, rmax)
        times = {}
        for method in ("allpairs", "cells"):
            eng = Engine(args.device, args.precision, args.threads, method=method)
            times[method] = time_engine(fr, eng, args.repeat)[0]
        eng = Engine(args.device, args.precision, args.threads, method="auto")
        t_auto, _, picked = time_engine(fr, eng, args.repeat)
        faster = min(times, key=times.get)
        rows.append([f"{n:,}", f"{fr.dims[0]:.1f}", f"{rmax:g}", f"{times['allpairs'] * 1e3:.2f}",
                     f"{times['cells'] * 1e3:.2f}", faster, picked,
                     "yes" if picked == faster else f"no ({max(times.values()) / min(times.values()):.2f}x)"])
        print(f"  ... N={n} rmax={rmax}: {times}", file=sys.stderr, flush=True)
    table(["N", "box (Å)", "rmax (Å)", "all pairs ms", "cells ms", "faster", "auto picks",
           "auto right?"], rows)


def box_vectors(lengths, angles):
    """Box vectors (rows) of lengths and angles in degrees: a along x, b in the xy plane."""
    a, b, c = lengths
    al, be, ga = np.radians(angles)
    cx = c * np.cos(be)
    cy = c * (np.cos(al) - np.cos(be) * np.cos(ga)) / np.sin(ga)
    return np.array([[a, 0, 0], [b * np.cos(ga), b * np.sin(ga), 0],
                     [cx, cy, np.sqrt(c * c - cx * cx - cy * cy)]])


def section_boxes(args):
    print(f"## Box shapes: water density, rmax {args.rmax:g} Å, {args.bins} bins, "
          f"method='cells', {args.device}\n")
    rows = []
    for n in args.cells_sizes:
        for name, angles in (("cube", (90.0, 90.0, 90.0)), ("dodecahedron", (60.0, 60.0, 90.0)),
                             ("octahedron", (70.53, 109.47, 70.53))):
            unit = abs(np.linalg.det(box_vectors((1.0, 1.0, 1.0), angles)))
            side = (n / DENSITY / unit) ** (1.0 / 3.0)
            fr = Frame(n, args.bins, args.rmax)
            fr.dims = np.array([side, side, side, *angles], np.float32)
            rng = np.random.default_rng(1)
            fr.coords = (rng.random((n, 3)) @ box_vectors(fr.dims[:3], angles)).astype(np.float32)
            fr.box = prepare_box(fr.dims)
            # (and the same build with the float filter off: every pair in double)
            variants = [("single", "single", None), ("double", "double", 1.0),
                        ("double, all pairs in double", "double", 0.0)]
            for label, precision, filt in variants:
                eng = Engine(args.device, precision, args.threads, method="cells")
                if filt is not None:
                    eng._impl = eng._make_impl(fr.offsets, fr.pairs)
                    eng._impl._double_filter = filt
                t, out, _ = time_engine(fr, eng, args.repeat)
                check = int((out[0] * np.arange(1, out.shape[1] + 1, dtype=np.uint64)).sum())
                blocks = getattr(eng._impl, "last_block_images", None)
                share = f"{(blocks[1] + blocks[2]) / max(1, sum(blocks)):.0%}" if blocks else "-"
                filt_info = getattr(eng._impl, "last_filter", None)
                to_double = "-"
                if precision == "double" and filt_info is not None and filt_info[0] >= 0:
                    to_double = f"{filt_info[1] / max(1, int(out.sum())):.2%} (bound {filt_info[0]:.2g})"
                rows.append([f"{n:,}", name, f"{side:.1f}", label, f"{t * 1e3:.1f}", share, to_double, check])
                print(f"  ... {name} {label}: {t * 1e3:.1f} ms {blocks} {filt_info}", file=sys.stderr, flush=True)
    table(["N", "box", "side (Å)", "precision", "ms/frame", "blocks with one image",
           "pairs sent to double / counted", "checksum"], rows)


def section_images(args):
    """Small triclinic boxes whose r_max exceeds half their smallest width: the kernels then
    try the extra lattice images (box_setup.hpp) for every pair."""
    print("## Extra images: 3,000 atoms at water density in small triclinic boxes, r_max above "
          f"half the smallest width, {args.bins} bins, {args.device}\n")
    rows = []
    for name, angles, rmax_frac in (("dodecahedron", (60.0, 60.0, 90.0), 0.45),
                                    ("octahedron", (70.53, 109.47, 70.53), 0.45)):
        n = 3000
        unit = abs(np.linalg.det(box_vectors((1.0, 1.0, 1.0), angles)))
        side = (n / DENSITY / unit) ** (1.0 / 3.0)
        rmax = rmax_frac * side
        fr = Frame(n, args.bins, rmax)
        fr.dims = np.array([side, side, side, *angles], np.float32)
        rng = np.random.default_rng(1)
        fr.coords = (rng.random((n, 3)) @ box_vectors(fr.dims[:3], angles)).astype(np.float32)
        fr.box = prepare_box(fr.dims)
        for method in ("allpairs", "cells"):
            for precision in ("single", "double"):
                eng = Engine(args.device, precision, args.threads, method=method)
                t, out, used = time_engine(fr, eng, args.repeat)
                check = int((out[0] * np.arange(1, out.shape[1] + 1, dtype=np.uint64)).sum())
                rows.append([name, f"{side:.1f}", f"{rmax:.1f}", method, precision, f"{t * 1e3:.2f}", check])
                print(f"  ... {name} {method} {precision}: {t * 1e3:.2f} ms", file=sys.stderr, flush=True)
    table(["box", "side (Å)", "r_max (Å)", "method", "precision", "ms/frame", "checksum"], rows)


SECTIONS = {"scaling": section_scaling, "cells": section_cells, "choice": section_choice,
            "boxes": section_boxes, "images": section_images}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default="scaling,cells,choice")
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--cells-sizes", default="100000,1000000")
    ap.add_argument("--bins", type=int, default=200)
    ap.add_argument("--rmax", type=float, default=15.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="single",
                    help="single, double, or both (scaling: each frame in both, with the ratio)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-freud", dest="freud", action="store_false")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.cells_sizes = [int(s) for s in args.cells_sizes.split(",")]
    print("# Cell-list benchmark\n")
    print(f"- command: `{shlex.join([sys.executable, *sys.argv])}`")
    print(f"- CPU: {cpu_model()}; Python {platform.python_version()}; mdakit_fastrdf "
          f"{mdakit_fastrdf.__version__}; freud {freud.__version__ if freud else 'n/a'}")
    info = build_info()
    print(f"- cpu_isa_selected={info['cpu_isa_selected']}, max_threads={info['max_threads']}, "
          f"cuda={info['cuda']}")
    if args.device.startswith("cuda"):
        print(f"- GPU: {mdakit_fastrdf.cuda_devices()[0]['name']}")
    print()
    for name in args.sections.split(","):
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
