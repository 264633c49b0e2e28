"""The van Hove function G(r, t): VanHove beside what a user would otherwise write, in one
run (issue 40's targets).

Workload: Brownian particles at water's atom density (0.1 per cubic Angstrom, D = 0.05
A^2/ps, 1 ps between frames) in memory (MDAnalysis's MemoryReader); lags 0 .. --lags - 1,
every frame a time origin (--frames frames: lag t has frames - t origins).

Rows:

* distinct G_d(r, t), ``VanHove(..., self_part=False)`` on --device, against MDAnalysis's
  ``capped_distance`` between the positions at t0 and t0 + t plus ``np.histogram``, the
  atoms' own pairs removed (the loop a user writes; timed over --baseline-pairs lag-origin
  pairs and given as a rate); the counts of those pairs are compared;
* self G_s(r, t), ``VanHove(..., distinct=False)``, against a NumPy loop over lags and
  origins (``np.linalg.norm`` of the displacements and ``np.histogram``, positions made
  whole by a NumPy loop (``numpy_unwrap``) in the loop, by the package's compiled pass in
  ours); the counts are compared;
* self F_s(q, t), ``IntermediateScattering(..., coherent=False)`` at --q, against the same
  loop with ``np.sinc``; the values are compared.

Rates are lag-origin pairs per second; our self rows are the fastest of 3 runs, the NumPy
loops run once. Usage::

    python benchmarks/bench_van_hove.py                               # 16,000 atoms, CPU
    python benchmarks/bench_van_hove.py --atoms 100000 --frames 199 --lags 100 --device cuda
    python benchmarks/bench_van_hove.py --frames 200 --lags 100 --no-distinct  # self parts
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DENSITY = 0.1
D = 0.05  # A^2/ps


def brownian_universe(n_atoms, n_frames, seed=0):
    import MDAnalysis as mda
    from MDAnalysis.coordinates.memory import MemoryReader

    box = (n_atoms / DENSITY) ** (1 / 3)
    rng = np.random.default_rng(seed)
    x = np.empty((n_frames, n_atoms, 3), dtype=np.float32)
    cur = rng.random((n_atoms, 3)) * box
    for f in range(n_frames):
        x[f] = np.mod(cur, box)
        cur += rng.normal(0.0, np.sqrt(2 * D), cur.shape)
    u = mda.Universe.empty(n_atoms, trajectory=True)
    u.load_new(x, format=MemoryReader, dimensions=[box, box, box, 90, 90, 90], dt=1.0)
    return u, box


def pairs_of(n_frames, lags):
    return [(tau, t0) for tau in lags for t0 in range(n_frames - tau)]


def baseline_distinct(u, todo, edges):
    """MDAnalysis capped_distance + np.histogram for the lag-origin pairs `todo`."""
    from MDAnalysis.lib.distances import capped_distance

    pos = u.trajectory.timeseries(order="fac")
    box = u.dimensions
    counts = np.zeros((len(todo), len(edges) - 1), dtype=np.int64)
    t = time.perf_counter()
    for k, (tau, t0) in enumerate(todo):
        pairs, d = capped_distance(pos[t0], pos[t0 + tau], edges[-1], box=box)
        d = d[pairs[:, 0] != pairs[:, 1]]
        counts[k] = np.histogram(d, bins=edges)[0]
    return time.perf_counter() - t, counts


def numpy_unwrap(pos, dims):
    """Positions made whole from consecutive frames in NumPy (each step to its minimum
    image in fractional coordinates, accumulated), as a user writes it."""
    from MDAnalysis.lib.mdamath import triclinic_vectors

    out = np.empty(pos.shape)
    out[0] = pos[0]
    for t in range(1, len(pos)):
        h = triclinic_vectors(dims).astype(np.float64)
        df = (pos[t].astype(np.float64) - pos[t - 1]) @ np.linalg.inv(h)
        df -= np.round(df)
        out[t] = out[t - 1] + df @ h
    return out


def baseline_self(u, lags, edges):
    """A NumPy loop: positions made whole, then every lag and origin, norms and
    np.histogram."""
    t = time.perf_counter()
    whole = numpy_unwrap(u.trajectory.timeseries(order="fac"), u.dimensions)
    counts = np.zeros((len(lags), len(edges) - 1), dtype=np.int64)
    for j, tau in enumerate(lags):
        for t0 in range(len(whole) - tau):
            d = np.linalg.norm(whole[t0 + tau] - whole[t0], axis=1)
            counts[j] += np.histogram(d, bins=edges)[0]
    return time.perf_counter() - t, counts


def distinct_rows(u, args, lags, todo, edges, kw):
    """G_d: VanHove against capped_distance + np.histogram (a sample of the pairs)."""
    from mdakit_fastrdf import VanHove

    rows = []
    VanHove(u.atoms, self_part=False, device=args.device, precision=args.precision,
            lags=[0, 1], nbins=args.nbins, range=(0.0, args.rmax)).run(stop=3)  # (warm-up)
    t = time.perf_counter()
    vh = VanHove(u.atoms, self_part=False, device=args.device, precision=args.precision,
                 **kw).run()
    ours = time.perf_counter() - t
    ours_rate = len(todo) / ours
    rows.append((f"G_d  VanHove(device={vh._device_used})", len(todo), ours, ours_rate))
    if args.baseline_pairs > 0:
        sample = [todo[int(i)] for i in np.linspace(0, len(todo) - 1, args.baseline_pairs)]
        base, ref = baseline_distinct(u, sample, edges)
        # (our counts are summed over the origins of a lag: compare the sampled pairs
        # through a run of one origin each)
        moved = total = 0
        for (tau, t0), counts in zip(sample, ref):
            one = VanHove(u.atoms, self_part=False, device=args.device,
                          precision=args.precision, lags=[tau], nbins=args.nbins,
                          range=(0.0, args.rmax)).run(
                start=t0, stop=t0 + tau + 1).results.count_distinct[0, 0]
            moved += int(np.abs(one.astype(np.int64) - counts).sum())
            total += int(counts.sum())
        rows.append(("G_d  capped_distance + np.histogram", len(sample), base,
                     len(sample) / base))
        print(f"  distinct counts of the sampled pairs against the baseline's: {moved} of "
              f"{total} pairs in another bin (float32 rounding at bin edges with precision "
              f"single)")
    else:
        rows.append(("G_d  capped_distance + np.histogram: not run", 0, float("nan"),
                     float("nan")))
    return rows


def baseline_f_self(u, lags, q):
    """A NumPy loop: positions made whole, then every lag and origin, norms and np.sinc."""
    t = time.perf_counter()
    whole = numpy_unwrap(u.trajectory.timeseries(order="fac"), u.dimensions)
    out = np.zeros((len(lags), len(q)))
    for j, tau in enumerate(lags):
        for t0 in range(len(whole) - tau):
            d = np.linalg.norm(whole[t0 + tau] - whole[t0], axis=1)
            for k, qv in enumerate(q):
                out[j, k] += np.sinc(qv * d / np.pi).mean()
        out[j] /= len(whole) - tau
    return time.perf_counter() - t, out


def self_rows(u, args, lags, todo, edges, kw):
    """G_s (VanHove) and F_s (IntermediateScattering) against NumPy loops."""
    from mdakit_fastrdf import IntermediateScattering, VanHove

    from _common import best_of

    rows = []
    # (ours: the fastest of 3 runs; the first run of a process also pays the allocator's
    # first touch of its arrays, ~0.5 s here)
    ours, vs = best_of(lambda: VanHove(u.atoms, distinct=False, **kw).run())
    base, ref = baseline_self(u, lags, edges)
    shells = 4 / 3 * np.pi * np.diff(edges ** 3)
    got = np.rint(vs.results.g_self_total * vs.results.n_origins[:, None] * args.atoms
                  * shells).astype(np.int64)
    print(f"  G_s counts equal the NumPy loop's: {np.array_equal(got, ref)}")
    rows.append(("G_s  VanHove", len(todo), ours, len(todo) / ours))
    rows.append(("G_s  NumPy loop", len(todo), base, len(todo) / base))
    ours, fs = best_of(lambda: IntermediateScattering(u.atoms, q=args.q, lags=lags,
                                                      coherent=False,
                                                      by={"all": u.atoms}).run())
    base, ref = baseline_f_self(u, lags, args.q)
    diff = float(np.max(np.abs(fs.results.f_self_total - ref)))
    print(f"  F_s at q = {args.q} 1/Å against the NumPy loop's: max |difference| {diff:.1e}")
    rows.append(("F_s  IntermediateScattering(coherent=False)", len(todo), ours,
                 len(todo) / ours))
    rows.append(("F_s  NumPy loop", len(todo), base, len(todo) / base))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--atoms", type=int, default=16000)
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--lags", type=int, default=10, help="lags 0 .. LAGS - 1")
    p.add_argument("--rmax", type=float, default=15.0)
    p.add_argument("--nbins", type=int, default=150)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="single", choices=["single", "double"])
    p.add_argument("--baseline-pairs", type=int, default=4)
    p.add_argument("--no-self", action="store_true")
    p.add_argument("--no-distinct", action="store_true")
    p.add_argument("--q", type=float, nargs="+", default=[1.0, 2.0],
                   help="|q| of the self F_s(q, t) rows (1/Å)")
    args = p.parse_args(argv)

    from _common import describe

    print("command: python benchmarks/" + os.path.basename(__file__) + " "
          + " ".join(argv if argv is not None else sys.argv[1:]))
    print(describe())
    u, box = brownian_universe(args.atoms, args.frames)
    lags = list(range(args.lags))
    todo = pairs_of(args.frames, lags)
    edges = np.linspace(0.0, args.rmax, args.nbins + 1)
    print(f"{args.atoms} atoms, box {box:.1f} Å, {args.frames} frames, lags 0..{lags[-1]}: "
          f"{len(todo)} lag-origin pairs; r <= {args.rmax} Å, {args.nbins} bins, "
          f"precision {args.precision}")
    rows = []

    kw = {"lags": lags, "nbins": args.nbins, "range": (0.0, args.rmax)}
    if not args.no_distinct:
        rows += distinct_rows(u, args, lags, todo, edges, kw)
    if not args.no_self:
        rows += self_rows(u, args, lags, todo, edges, kw)
    print()
    print(f"| {'what':40s} | lag-origin pairs | time (s) | pairs/s | ratio |")
    print("|---|---|---|---|---|")
    for k, (name, n, sec, rate) in enumerate(rows):
        ratio = rate / rows[k - k % 2 + 1][3]
        print(f"| {name:40s} | {n} | {sec:.2f} | {rate:.3g} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
