"""The node engine at scale: 1 and 2 (or more) GPUs, the node's decode ceiling, hybrid
plans and dask.distributed, in one run, counts compared in every row.

Workload (issue 37): 1M atoms of a diffusing liquid at water's atom density, ``--frames``
frames (600) written once as DCD and XTC (XTC in parallel chunks, concatenated), the RDF
of all atoms with all atoms, 0-15 Angstrom, 200 bins, the analysis's defaults otherwise.

Rows:

* **decode ceiling**: R processes that only read frames (``trajectory[i]``, no gather, wrap
  or ring), R = 1, 2, 4, ... all CPUs; frames/s of all of them together;
* **node, G GPU**: ``NodeBackend(gpus=G)`` (its default plan: readers on the free CPUs),
  each run in a new interpreter (its first GPU work, as a script's), end to end
  (``run()``'s wall time), with the steady rate (after the first part), the workers'
  busy and waiting seconds, and the run's parts;
* **node, G GPU + CPU workers**: the same with two CPU workers beside the GPUs
  (``hybrid=True``, the default hybrid plan: they share the readers' cores at idle priority);
* **dask, G workers**: a ``distributed.LocalCluster``-like cluster of one worker process per
  GPU (``CUDA_VISIBLE_DEVICES``), :class:`~mdakit_fastrdf.backends.DaskDistributedBackend`;
* **simulation**: :func:`mdakit_fastrdf.backends.simulate.simulate` with the one-GPU
  steady rate, start-up and decode ceiling measured above: what the scheduler predicts
  for G GPUs, beside the measurement.

Usage::

    python benchmarks/bench_scaling.py                      # every GPU count present
    python benchmarks/bench_scaling.py --frames 60 --atoms 20000 --no-dask   # smoke test
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

DENSITY = 0.1  # atoms per cubic Angstrom


@functools.lru_cache(maxsize=2)
def _start(n_atoms, seed):
    L = (n_atoms / DENSITY) ** (1 / 3)
    return np.random.default_rng(seed).random((n_atoms, 3), dtype=np.float32) * L, L


def _positions(n_atoms, frame, seed=1):
    """Frame `frame` of the liquid: start positions plus a displacement that grows as
    sqrt(frame) (diffusion), wrapped into the cubic box."""
    x0, L = _start(n_atoms, seed)
    step = np.random.default_rng(seed + 1 + frame).standard_normal((n_atoms, 3),
                                                                   dtype=np.float32)
    return np.mod(x0 + 0.3 * math.sqrt(frame) * step, L).astype(np.float32), L


def _write_chunk(args):
    path, fmt, n_atoms, lo, hi = args
    import MDAnalysis as mda

    u = mda.Universe.empty(n_atoms, trajectory=True)
    with mda.Writer(path, n_atoms, format=fmt) as w:
        for f in range(lo, hi):
            u.atoms.positions, L = _positions(n_atoms, f)
            u.dimensions = [L, L, L, 90, 90, 90]
            w.write(u.atoms)
    return path


def generate(cache, n_atoms, n_frames):
    """The DCD and XTC files (written once); XTC in parallel chunks, concatenated (an XTC
    file is a sequence of self-contained frames)."""
    os.makedirs(cache, exist_ok=True)
    paths = {fmt: os.path.join(cache, f"liquid_{n_atoms}_{n_frames}.{fmt.lower()}")
             for fmt in ("DCD", "XTC")}
    t0 = time.perf_counter()
    n_proc = max(1, min(os.cpu_count() or 1, 32))
    jobs = []
    if not os.path.exists(paths["XTC"]):
        bounds = np.linspace(0, n_frames, min(n_proc, n_frames) + 1).astype(int)
        jobs += [(f"{paths['XTC']}.{k}", "XTC", n_atoms, int(a), int(b))
                 for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])) if b > a]
    if not os.path.exists(paths["DCD"]):
        jobs.append((paths["DCD"] + ".part", "DCD", n_atoms, 0, n_frames))
    if jobs:
        with mp.get_context("fork").Pool(n_proc) as pool:
            done = pool.map(_write_chunk, jobs[::-1], chunksize=1)
        xtc_parts = sorted((p for p in done if ".xtc." in p), key=lambda p: int(p.rsplit(".", 1)[1]))
        if xtc_parts:
            with open(paths["XTC"] + ".part", "wb") as out:
                for p in xtc_parts:
                    with open(p, "rb") as f:
                        out.write(f.read())
                    os.remove(p)
            os.replace(paths["XTC"] + ".part", paths["XTC"])
        if os.path.exists(paths["DCD"] + ".part"):
            os.replace(paths["DCD"] + ".part", paths["DCD"])
        print(f"# wrote {n_frames} frames of {n_atoms} atoms (DCD, XTC) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    for fmt, p in paths.items():  # offsets once, and the files in the page cache
        u = _universe(p, fmt, n_atoms)
        assert len(u.trajectory) == n_frames, (p, len(u.trajectory))
    return paths


def _universe(path, fmt, n_atoms, repeat=1):
    import MDAnalysis as mda

    u = mda.Universe.empty(n_atoms, trajectory=True)
    u.load_new(path if repeat == 1 else [path] * repeat, format=fmt)
    return u


def _decode(args):
    path, fmt, n_atoms, frames, barrier = args
    u = _universe(path, fmt, n_atoms)
    u.trajectory[frames[0]]
    barrier.wait()
    t0 = time.perf_counter()
    for f in frames[1:]:
        u.trajectory[f]
    return time.perf_counter() - t0, len(frames) - 1


def decode_ceiling(path, fmt, n_atoms, n_frames, counts, per_process):
    """frames/s of R processes that only decode frames, for R in `counts`."""
    out = {}
    ctx = mp.get_context("fork")
    for r in counts:
        barrier = ctx.Manager().Barrier(r)
        frames = [list(range(k, n_frames, r))[: per_process + 1] for k in range(r)]
        with ctx.Pool(r) as pool:
            t0 = time.perf_counter()
            res = pool.map(_decode, [(path, fmt, n_atoms, fr, barrier) for fr in frames])
            wall = time.perf_counter() - t0
        n = sum(k for _, k in res)
        slowest = max(t for t, _ in res)
        out[r] = n / slowest
        print(f"# decode {fmt} R={r}: {out[r]:.1f} frames/s ({n} frames, {wall:.1f} s)",
              flush=True)
    return out


_FRESH = r"""
import json, sys, time
import numpy as np
import MDAnalysis as mda
from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.backends import NodeBackend

path, fmt, n_atoms, kw, opts, out, warm, repeat = json.loads(sys.argv[1])
u = mda.Universe.empty(n_atoms, trajectory=True)
u.load_new(path if repeat == 1 else [path] * repeat, format=fmt)
standin = opts.pop("_gpu_standin", False)
if standin:  # no GPU here: CPU stand-ins of the GPU workers (a smoke test)
    from mdakit_fastrdf.backends.topology import NodeTopology, detect_topology
    t = detect_topology()
    opts["topology"] = NodeTopology(t.groups, n_gpus=opts["gpus"], source=t.source,
                                    gpu_source="stand-in")
backend = NodeBackend(**opts, _gpu_standin=standin)
plan = backend.describe()
if not warm:
    t0 = time.perf_counter()
    r = InterRDF(u.atoms, u.atoms, **kw).run(backend=backend)
    wall = time.perf_counter() - t0
    np.save(out, r.results.count_uint64)
    print(json.dumps({"wall": wall, "plan": plan, "lr": backend.last_run}, default=str))
else:  # a warm engine: [(stop, label), ...] run one after the other in one with block
    walls, lrs, pids = [], [], []
    with backend as node:
        for stop in warm:
            t0 = time.perf_counter()
            r = InterRDF(u.atoms, u.atoms, **kw).run(backend=node, stop=stop)
            walls.append(time.perf_counter() - t0)
            lrs.append(node.last_run)
            pids.append(sorted(w["pid"] for w in node.last_run["workers"]))
            if stop is None:
                np.save(out, r.results.count_uint64)
    print(json.dumps({"walls": walls, "plan": plan, "lrs": lrs, "same_pids":
                      all(p == pids[0] for p in pids)}, default=str))
"""


def fresh_run(path, fmt, n_atoms, kw, opts, warm=None, trace=None, repeat=1):
    """One node run in a new interpreter; `trace`: a directory for its trace
    (``MDAKIT_FASTRDF_TRACE``), summarised after the run; `repeat`: the file read that many
    times over (MDAnalysis's ChainReader), a longer trajectory without writing one."""
    env = dict(os.environ)
    if trace:
        env["MDAKIT_FASTRDF_TRACE"] = trace
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "counts.npy")
        spec = json.dumps([path, fmt, n_atoms, kw, opts, out, warm, repeat])
        proc = subprocess.run([sys.executable, "-c", _FRESH, spec], capture_output=True,
                              text=True, env=env)
        if trace:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from trace_report import report

            report(trace)
        if proc.returncode != 0:
            raise RuntimeError(f"node run failed:\n{proc.stderr[-4000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        return info, np.load(out)


def busy_rate(lr):
    """Frames per busy second of the GPU workers together (each worker's frames over the
    seconds it spent on its parts): the rate the run would have without its start and
    end."""
    gw = [w for w in lr["workers"] if w["kind"] == "gpu"]
    return sum(w["frames"] / w["busy_s"] for w in gw if w["busy_s"] > 0)


def _pin_all_threads(cpus):
    """This dask worker process, every thread of it, on `cpus` (its share of the node)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass
    return sorted(os.sched_getaffinity(0))


def dask_run(path, fmt, n_atoms, kw, layout, engine, repeat=1):
    """A dask.distributed cluster of one worker per entry of `layout` ((visible GPUs,
    cpus) each), the analysis run on it twice (the first run starts the dask workers' node
    engines, the second finds them warm). Returns ([wall, wall], counts)."""
    import dask
    from distributed import Client, Nanny, Scheduler, SpecCluster

    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.backends import DaskDistributedBackend

    u = _universe(path, fmt, n_atoms, repeat)
    workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {
        "CUDA_VISIBLE_DEVICES": vis}}} for i, (vis, _) in enumerate(layout)}
    with dask.config.set({"distributed.worker.daemon": False}):
        cluster = SpecCluster(workers=workers, scheduler={
            "cls": Scheduler, "options": {"dashboard_address": None}})
    with cluster, Client(cluster) as client:
        client.wait_for_workers(len(layout))
        for (_, cpus), addr in zip(layout, sorted(client.scheduler_info()["workers"],
                                                  key=lambda a: client.scheduler_info()[
                                                      "workers"][a]["name"])):
            client.run(_pin_all_threads, list(cpus), workers=[addr])
        b = DaskDistributedBackend(client, threads_per_worker=1, engine=engine)
        walls = []
        for _ in range(2):
            t0 = time.perf_counter()
            r = InterRDF(u.atoms, u.atoms, **kw).run(backend=b)
            walls.append(time.perf_counter() - t0)
        return walls, r.results.count_uint64


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--atoms", type=int, default=1_000_000)
    p.add_argument("--frames", type=int, default=600)
    p.add_argument("--formats", nargs="*", default=["DCD", "XTC"])
    p.add_argument("--gpus", type=int, nargs="*", default=None)
    p.add_argument("--per-process", type=int, default=12,
                   help="frames each decoding process reads for the ceiling")
    p.add_argument("--no-dask", action="store_true")
    p.add_argument("--no-hybrid", action="store_true")
    p.add_argument("--dask-parts", action="store_true",
                   help="also dask with engine='parts' (each part read by a dask worker)")
    p.add_argument("--warm", action="store_true",
                   help="also a warm engine: run, run again, then 40 frames")
    p.add_argument("--trace", default=None,
                   help="a directory: trace each node run (MDAKIT_FASTRDF_TRACE) into a "
                        "subdirectory of it and print where its time went")
    p.add_argument("--gpu-threads", type=int, default=None,
                   help="NodeBackend(gpu_threads=N) in the node rows (default: the plan's)")
    p.add_argument("--no-ceiling", action="store_true",
                   help="skip the decode ceiling (R=1 only)")
    p.add_argument("--repeat", type=int, default=1,
                   help="node runs read the trajectory K times over (a K-times longer run, "
                        "MDAnalysis's ChainReader of the same file): start-up's share falls")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "fastrdf-scaling"))
    args = p.parse_args(argv)

    from mdakit_fastrdf.backends.simulate import simulate
    from mdakit_fastrdf.backends.topology import detect_topology

    topo = detect_topology()
    n_cpus = topo.n_cpus
    gpu_counts = args.gpus or [g for g in (1, 2, 4, 8) if g <= topo.n_gpus]
    standin = not topo.n_gpus
    if standin:
        print("# no GPU: GPU workers are CPU stand-ins (a smoke test of the script)")
        gpu_counts = args.gpus or [1]
    paths = generate(args.cache, args.atoms, args.frames)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    n_frames = args.frames * args.repeat  # (what a node run reads)
    kw = {"nbins": 200, "range": (0.0, 15.0)}
    counts = sorted({r for r in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128) if r < n_cpus}
                    | {n_cpus})
    rows, ref = [], {}

    def record(fmt, label, wall, cnt, notes=""):
        ref.setdefault(fmt, cnt)  # (XTC rounds the positions: its own reference)
        same = "yes" if np.array_equal(ref[fmt], cnt) else "NO"
        rate = n_frames / wall
        rows.append([fmt, label, f"{wall:.2f}", f"{rate:.1f}", same, notes])
        print(f"# {fmt} {label}: {wall:.2f} s, {rate:.1f} frames/s, same={same} {notes}",
              flush=True)
        return rate

    summary = {}
    for fmt in args.formats:
        path = paths[fmt]
        ceiling = decode_ceiling(path, fmt, args.atoms, args.frames,
                                 [1] if args.no_ceiling else counts, args.per_process)
        best_r = max(ceiling, key=ceiling.get)
        rows.append([fmt, "decode ceiling", "-", f"{ceiling[best_r]:.1f}", "-",
                     f"R={best_r} of " + ", ".join(f"{r}: {v:.0f}" for r, v in ceiling.items())])
        one = None
        for g in gpu_counts:
            opts = {"gpus": g, "_gpu_standin": standin}
            if args.gpu_threads:
                opts["gpu_threads"] = args.gpu_threads
            tr = (os.path.join(args.trace, f"{fmt}_{g}gpu_t{args.gpu_threads or 'auto'}")
                  if args.trace else None)
            info, cnt = fresh_run(path, fmt, args.atoms, kw, opts, trace=tr, repeat=args.repeat)
            lr = info["lr"]
            st = busy_rate(lr)
            gw = [w for w in lr["workers"] if w["kind"] == "gpu"]
            notes = (f"busy rate {st:.0f}/s; ready {lr['first_ready_s']:.2f} s; "
                     f"{lr['n_parts']} parts; busy " + "/".join(f"{w['busy_s']:.2f}" for w in gw)
                     + " s; waited " + "/".join(f"{w['feed_wait_s']:.2f}" for w in gw)
                     + f" s; {len(lr['readers'])} readers; dup {lr['duplicates_started']}")
            rate = record(fmt, f"node, {g} GPU", info["wall"], cnt, notes)
            if g == gpu_counts[0]:
                # the simulation's start: when the GPU workers began computing (their CUDA
                # contexts made), and its end: the run's wall after the last part
                one = (rate, st, lr["first_part_s"], info["wall"] - lr["parts_done_s"][-1], g)
            summary[(fmt, g)] = rate
            if not args.no_hybrid and n_cpus >= 8:
                # the default hybrid plan: every free core reads, and two CPU workers share
                # the readers' cores at idle priority
                opts = {"gpus": g, "_gpu_standin": standin, "hybrid": True, "cpu_workers": 2}
                info, cnt = fresh_run(path, fmt, args.atoms, kw, opts,
                                      trace=os.path.join(args.trace, f"{fmt}_{g}gpu_hybrid")
                                      if args.trace else None, repeat=args.repeat)
                lr = info["lr"]
                cw = [w for w in lr["workers"] if w["kind"] == "cpu"]
                notes = ("CPU workers took " + "/".join(str(w["frames"]) for w in cw)
                         + f" frames; dup {lr['duplicates_started']}, cancelled "
                         f"{lr.get('cancelled', 0)}, declined {lr.get('cpu_parts_declined', 0)}")
                hrate = record(fmt, f"node, {g} GPU + 2 idle-priority CPU workers", info["wall"],
                               cnt, notes)
                rows[-1][-1] += f"; {hrate / rate:.2f}x GPUs alone"
            if args.warm:
                # a warm engine: the whole run again, then the first 40 frames (issue 24)
                info, cnt = fresh_run(path, fmt, args.atoms, kw, {"gpus": g, "_gpu_standin": standin},
                                      warm=[None, None, 40],
                                      trace=os.path.join(args.trace, f"{fmt}_{g}gpu_warm")
                                      if args.trace else None, repeat=args.repeat)
                w = info["walls"]
                record(fmt, f"node, {g} GPU, warm engine (2nd run)", w[1], cnt,
                       f"1st run {w[0]:.2f} s; same pids {info['same_pids']}; "
                       f"{min(40, n_frames)} frames warm: {w[2]:.3f} s = "
                       f"{min(40, n_frames) / w[2]:.0f} frames/s; busy rate "
                       f"{busy_rate(info['lrs'][1]):.0f}/s")
            if not args.no_dask and not standin:
                all_cpus = sorted(os.sched_getaffinity(0))
                vis = ",".join(str(k) for k in range(g))
                for engine, layout, label in (
                        ("node", [(vis, all_cpus)], f"dask, 1 worker owning the node ({g} GPU)"),
                        ("node", [(str(k), all_cpus[k * len(all_cpus) // g:(k + 1) * len(all_cpus) // g])
                                  for k in range(g)], f"dask, {g} worker(s), 1 GPU + 1/{g} of the cores each"),
                        ("parts", [(str(k), all_cpus) for k in range(g)], f"dask parts, {g} worker(s), 1 GPU each")):
                    if engine == "parts" and not args.dask_parts:
                        continue  # (the parts on the dask workers themselves: slow)
                    if label.startswith(f"dask, {g} worker") and g == 1:
                        continue  # (the same as the row before)
                    walls, cnt = dask_run(path, fmt, args.atoms, kw, layout, engine, args.repeat)
                    drate = record(fmt, label + ", 2nd run", walls[1], cnt,
                                   f"1st run {walls[0]:.2f} s; ")
                    rows[-1][-1] += f"{drate / rate:.2f}x the node backend"
        if one is not None and len(gpu_counts) > 1:
            _, st1, start, end, g1 = one
            for g in gpu_counts[1:]:
                fmt_eff = summary[(fmt, g)] / (g / g1 * summary[(fmt, g1)])
                sim = simulate(n_frames, gpu_rates=[st1 / g1] * g, gpu_start_s=start,
                               decode_rate=ceiling[best_r] if fmt == "XTC" else None)
                sim1 = simulate(n_frames, gpu_rates=[st1 / g1] * g1, gpu_start_s=start,
                                decode_rate=ceiling[best_r] if fmt == "XTC" else None)
                pred, pred1 = (n_frames / (x.wall_s + end) for x in (sim, sim1))
                rows.append([fmt, f"{g} vs {g1} GPU", "-", f"{summary[(fmt, g)] / summary[(fmt, g1)]:.2f}x",
                             "-", f"efficiency {fmt_eff:.2f}; simulation predicts "
                             f"{pred:.0f} frames/s ({pred / pred1:.2f}x; start {start:.2f} s, "
                             f"end {end:.2f} s, {st1 / g1:.0f} frames/s a GPU)"])
    print(f"\n{n_frames} frames" + (f" ({args.frames} read {args.repeat} times over)"
                                     if args.repeat > 1 else "") + f" of {args.atoms:,} atoms, RDF of all atoms, 0-15 A, 200 "
          f"bins; {n_cpus} CPUs, {topo.n_gpus} GPU(s); each node run a new interpreter, "
          "end to end (run()'s wall time)\n")
    head = ["format", "setup", "time s", "frames/s", "counts = first row of the format", "notes"]
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")


if __name__ == "__main__":
    main()
