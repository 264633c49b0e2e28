"""Debye scattering I(q) of a large finite system on a GPU (issue 28's GPU target).

A generated box-less system: ``--atoms`` atoms (default 300,000) of nine elements, uniform
in a sphere of ``--radius`` Å, ``--frames`` frames held in memory (a new random
configuration each frame), ``--bins`` bins over 0 to the sphere's diameter: the same size
as CADISHI's 280k-atom benchmark (K. Reuter and J. Köfinger, Comput. Phys. Commun. 236,
274 (2019): 5.7 frames/s on two GTX 1080). Times :class:`mdakit_fastrdf.DebyeScattering`
``run()`` (histograms of all 45 species pairs in one kernel call per frame, the transform
once at the end) per precision: end to end, and per added frame (a run over all frames
against one over two: the transform at the end, the same for any number of frames, drops
out), with the pair rate in bapps; and compares the two precisions' intensities.

    python benchmarks/bench_debye_gpu.py --device cuda             # the H100 target
    python benchmarks/bench_debye_gpu.py --device cpu --atoms 5000  # smoke test on a CPU
"""

from __future__ import annotations

import argparse
import time

import numpy as np

ELEMENTS = ("C", "N", "O", "S", "P", "H", "Fe", "Na", "Cl")


def make_universe(n_atoms, n_frames, radius, seed=0):
    import MDAnalysis as mda

    rng = np.random.default_rng(seed)
    u = mda.Universe.empty(n_atoms, trajectory=False)
    u.add_TopologyAttr("elements", [ELEMENTS[i % len(ELEMENTS)] for i in range(n_atoms)])
    u.add_TopologyAttr("names", [ELEMENTS[i % len(ELEMENTS)] for i in range(n_atoms)])
    frames = np.empty((n_frames, n_atoms, 3), dtype=np.float32)
    for f in range(n_frames):
        v = rng.normal(size=(n_atoms, 3))
        v /= np.linalg.norm(v, axis=1)[:, None]
        frames[f] = v * (radius * rng.random(n_atoms) ** (1.0 / 3.0))[:, None]
    from MDAnalysis.coordinates.memory import MemoryReader

    u.load_new(frames, format=MemoryReader)
    return u


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--atoms", type=int, default=300_000)
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--radius", type=float, default=100.0, help="sphere radius (Å)")
    ap.add_argument("--bins", type=int, default=8000)
    ap.add_argument("--q-max", type=float, default=1.0, help="largest q (1/Å)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", nargs="+", default=["single", "double"])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)

    from mdakit_fastrdf import DebyeScattering

    u = make_universe(args.atoms, args.frames, args.radius)
    q = np.linspace(0.01, args.q_max, 200)
    d_max = 2.0 * args.radius * 1.0001
    pairs = args.atoms * (args.atoms - 1) / 2
    print(f"# Debye I(q): {args.atoms} atoms, 9 elements, {args.frames} frames, "
          f"{args.bins} bins over 0-{d_max:.1f} Å, {q.size} q values up to {args.q_max} 1/Å, "
          f"device {args.device}\n")
    print("| precision | run, all frames (s) | run, 2 frames (s) | frames/s end to end | "
          "frames/s per added frame | bapps (unordered pairs) | kernel device |")
    print("|---|---|---|---|---|---|---|")
    results = {}

    def timed(precision, stop):
        best, d = np.inf, None
        for _ in range(args.repeat):
            d = DebyeScattering(u.atoms, q=q, weights="xray", nbins=args.bins,
                                range=(0.0, d_max), device=args.device, precision=precision)
            t0 = time.perf_counter()
            d.run(stop=stop)
            best = min(best, time.perf_counter() - t0)
        return best, d

    for precision in args.precision:
        t_all, d = timed(precision, None)
        t_two, _ = timed(precision, 2)
        results[precision] = d.results
        used = getattr(getattr(d, "_engine", None), "device_used", args.device)
        # the transform at the end costs the same for any number of frames: the rate of the
        # frame loop is the added frames over the added time
        steady = (args.frames - 2) / (t_all - t_two) if t_all > t_two else float("nan")
        print(f"| {precision} | {t_all:.3f} | {t_two:.3f} | {args.frames / t_all:.2f} | "
              f"{steady:.2f} | {pairs * steady / 1e9:.0f} | {used} |")
    if len(results) == 2:
        a, b = (results[p] for p in args.precision)
        same = np.array_equal(a.count_uint64, b.count_uint64)
        rel = np.max(np.abs(a.intensity - b.intensity) / np.abs(b.intensity))
        print(f"\ncounts identical across precisions: {same}; max relative |ΔI| {rel:.2e}")


if __name__ == "__main__":
    main()
