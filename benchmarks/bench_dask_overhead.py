"""A run's fixed cost through dask node engines against a warm node engine (CPU).

What a dask run adds to the node engine it drives: the client pickles the analysis, dask
scatters it, the dask worker loads it and hands it to its (warm) node engine. The workload
makes the compute negligible (the RDF of a 64-atom selection over a few frames of an
N-atom Universe read from a DCD), so the wall time of a run is its fixed cost, most of it
the Universe's pickle. Rows: a warm ``NodeBackend`` (the median of runs 2..), and one dask
worker owning the node (``DaskDistributedBackend``, node engines, runs 2..); counts
compared.

    python benchmarks/bench_dask_overhead.py                  # 1M atoms, 7 runs each
    python benchmarks/bench_dask_overhead.py --atoms 200000 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from _common import describe


def make_dcd(path, n_atoms, n_frames, box=100.0, seed=3):
    import MDAnalysis as mda

    u = mda.Universe.empty(n_atoms, trajectory=True)
    rng = np.random.default_rng(seed)
    with mda.Writer(path, n_atoms) as w:
        for _ in range(n_frames):
            u.atoms.positions = rng.uniform(0, box, (n_atoms, 3)).astype(np.float32)
            u.dimensions = [box, box, box, 90, 90, 90]
            w.write(u.atoms)


def universe(path, n_atoms):
    import MDAnalysis as mda

    top = mda.Universe.empty(n_atoms, trajectory=False)
    return mda.Universe(top._topology, path)


def run_node(u, runs, options):
    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.backends import NodeBackend

    sel = u.atoms[:64]
    walls = []
    with NodeBackend(**options) as node:
        for _ in range(runs):
            t0 = time.perf_counter()
            r = InterRDF(sel, sel, nbins=50, range=(0.0, 10.0)).run(backend=node)
            walls.append(time.perf_counter() - t0)
    return walls, r.results.count_uint64


def run_dask(u, runs, options):
    import dask
    from distributed import Client, LocalCluster

    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.backends import DaskDistributedBackend

    sel = u.atoms[:64]
    walls = []
    with dask.config.set({"distributed.worker.daemon": False}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    with cluster, Client(cluster) as client:
        b = DaskDistributedBackend(client, engine="node", node_options=options)
        for _ in range(runs):
            t0 = time.perf_counter()
            r = InterRDF(sel, sel, nbins=50, range=(0.0, 10.0)).run(backend=b)
            walls.append(time.perf_counter() - t0)
    return walls, r.results.count_uint64


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--atoms", type=int, default=1_000_000)
    p.add_argument("--frames", type=int, default=4)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "fastrdf-dask-overhead"))
    args = p.parse_args(argv)
    os.makedirs(args.cache, exist_ok=True)
    path = os.path.join(args.cache, f"random_{args.atoms}_{args.frames}.dcd")
    if not os.path.exists(path):
        make_dcd(path, args.atoms, args.frames)
    u = universe(path, args.atoms)
    options = {"gpus": None, "cpu_workers": 1, "readers": 1}
    node_walls, node_counts = run_node(u, args.runs, options)
    dask_walls, dask_counts = run_dask(u, args.runs, options)
    same = np.array_equal(node_counts, dask_counts)
    node_med = statistics.median(node_walls[1:])
    dask_med = statistics.median(dask_walls[1:])
    print(f"\n{args.atoms:,} atoms, {args.frames} frames (DCD), InterRDF of 64 atoms; "
          f"NodeBackend({', '.join(f'{k}={v!r}' for k, v in options.items())})")
    print(f"Command: `python benchmarks/bench_dask_overhead.py --atoms {args.atoms} "
          f"--frames {args.frames} --runs {args.runs}`")
    print(f"Machine: {describe()}\n")
    print("| setup | first run s | runs 2.. s (median) | runs 2.. s (all) | counts = node |")
    print("|---|---|---|---|---|")
    print(f"| warm node engine | {node_walls[0]:.3f} | {node_med:.3f} | "
          f"{' '.join(f'{w:.3f}' for w in node_walls[1:])} | - |")
    print(f"| dask, 1 worker owning the node | {dask_walls[0]:.3f} | {dask_med:.3f} | "
          f"{' '.join(f'{w:.3f}' for w in dask_walls[1:])} | {'yes' if same else 'NO'} |")
    print(f"\ndask adds {dask_med - node_med:+.3f} s a run to the warm node engine")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
