"""Parallel backends over frames: serial vs multiprocessing vs the node backend vs dask.

Two modes:

``--mode cpu`` (default; for a small CPU machine)
    A generated trajectory (``--atoms`` atoms, ``--frames`` frames, XTC, written once to
    ``--cache``) with three workloads: ion-ion (few pairs: reading the frame is most of
    the time), ion-water (mixed) and water O-O (kernel-bound). Times serial
    (one process, all cores), MDAnalysis's multiprocessing backend and the node backend with
    ``--cpu-workers`` CPU workers; best of ``--repeat`` interleaved repeats (each round runs
    every method once, so on a shared machine all meet the same load); checks the counts
    are identical.

``--mode scaling`` (for a multi-GPU machine)
    A generated 1M-atom trajectory (DCD, ``--frames`` >= 200, written once), the RDF of the
    first ``--sel-atoms`` atoms with all atoms; frames/s on 1, 2, 4 GPUs (up to the GPUs
    present) with and without CPU workers (node backend), and with dask.distributed, one
    worker process per GPU (each sees its GPU through ``CUDA_VISIBLE_DEVICES``). Without a
    GPU it runs the CPU rows only (a smoke test of the script).

``--mode e2e`` (a GPU node; runs on CPUs too)
    End to end from a trajectory on disk (generated once: ``--formats`` XTC and DCD,
    ``--sizes`` atoms, ``--frames`` frames), the RDF of all atoms with all atoms: frames/s
    of reading alone (one process gathering the positions of every frame), of the kernel on
    frames already in memory, of a serial run, of the node backend whose workers read their
    own frames (``readers=0``) and of the node backend with readers (the default plan), and
    the GPU's busy share. The node run with readers is timed twice: as the first GPU work of
    a new interpreter (its GPU workers are forked: what a script sees) and in this process
    after it has used CUDA (spawned GPU workers). "Device alone": the engine histogramming one
    prepared frame again and again (every core packing it), the GPU worker's ceiling;
    "steady": frames after the first part over their time; GPU busy: steady x device-alone
    time per frame.

Examples
--------
::

    python benchmarks/bench_backends.py                     # 2-core laptop: table (a)
    python benchmarks/bench_backends.py --mode scaling      # 4-GPU node: table (b)
    python benchmarks/bench_backends.py --mode e2e --device cuda   # GPU node: table (c)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from _common import best_of, describe


def machine():
    from mdakit_fastrdf.backends import NodeBackend

    plan = NodeBackend().describe()
    return (describe(("MDAnalysis",)) + "\n\nDefault node plan:\n"
            + "\n".join("    " + line for line in plan.splitlines()))


def generate(path, n_atoms, n_frames, fmt, density=0.1, seed=1):
    """Random positions in a cubic box (atom density of water); names: every 500th atom
    'NA', every third 'OW', the others 'HW' (an ion-water-like system). Written once."""
    import MDAnalysis as mda

    L = (n_atoms / density) ** (1 / 3)
    u = mda.Universe.empty(n_atoms, trajectory=True)
    i = np.arange(n_atoms)
    u.add_TopologyAttr("names", np.where(i % 500 == 0, "NA", np.where(i % 3 == 0, "OW", "HW")))
    if not os.path.exists(path):
        rng = np.random.default_rng(seed)
        tmp = path + ".part"
        t0 = time.perf_counter()
        with mda.Writer(tmp, n_atoms, format=fmt) as w:
            for _ in range(n_frames):
                u.atoms.positions = (rng.random((n_atoms, 3), dtype=np.float32) * L)
                u.dimensions = [L, L, L, 90, 90, 90]
                w.write(u.atoms)
        os.replace(tmp, path)
        print(f"# wrote {path} ({n_atoms} atoms, {n_frames} frames) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    u.load_new(path, format=fmt)
    return u


def mode_cpu(args):
    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.backends import NodeBackend

    os.makedirs(args.cache, exist_ok=True)
    path = os.path.join(args.cache, f"bench_{args.atoms}_{args.frames}.xtc")
    u = generate(path, args.atoms, args.frames, "XTC")
    na = u.select_atoms("name NA")
    ow = u.select_atoms("name OW")
    water = ow if args.water is None else ow[: args.water]
    workloads = [
        ("ion-ion (reading-bound)", na, na),
        ("ion-water (mixed)", na, water),
        ("water O-O (kernel-bound)", ow[: args.oo], ow[: args.oo]),
    ]
    if args.workloads:
        workloads = [w for w in workloads if w[0].split()[0] in args.workloads]
    rows = []
    for label, a, b in workloads:
        kw = dict(nbins=75, range=(0.0, 12.0), method=args.method)
        backend = NodeBackend(cpu_workers=args.cpu_workers)
        fed = NodeBackend(readers=args.readers, cpu_workers=1)
        runs = {
            "serial": lambda: InterRDF(a, b, **kw).run(),
            "multiprocessing": lambda: InterRDF(a, b, **kw).run(
                backend="multiprocessing", n_workers=args.cpu_workers),
            "node": lambda: InterRDF(a, b, **kw).run(backend=backend),
            "node (readers)": lambda: InterRDF(a, b, **kw).run(backend=fed),
        }
        # interleaved repeats: on a shared machine every method meets the same quiet and
        # busy moments; the best of each is reported
        times, out = {k: [] for k in runs}, {}
        for _ in range(args.repeat):
            for k, fn in runs.items():
                t, out[k] = best_of(fn, 1)
                times[k].append(t)
        best = {k: min(v) for k, v in times.items()}
        med = {k: float(np.median(v)) for k, v in times.items()}
        for k in ("multiprocessing", "node", "node (readers)"):
            assert np.array_equal(out[k].results.count_uint64, out["serial"].results.count_uint64)
        t_ser, t_mp, t_node = best["serial"], best["multiprocessing"], best["node"]
        t_fed = best["node (readers)"]
        pairs = len(a) * len(b)
        rows.append((label, f"{len(a)} x {len(b)}", f"{pairs:.2g}", args.frames,
                     f"{t_ser:.3f}", f"{t_mp:.3f}", f"{t_node:.3f}", f"{t_fed:.3f}",
                     f"{t_ser / t_mp:.2f}", f"{t_ser / t_node:.2f}",
                     f"{med['serial'] / med['node']:.2f}", f"{t_ser / t_fed:.2f}",
                     f"{med['serial'] / med['node (readers)']:.2f}"))
        print(f"# {label}: node workers {[(w['kind'], w['n_threads'], w['cpus'], w['frames']) for w in backend.last_run['workers']]}", flush=True)
    print(f"\n75 bins, 0-12 A, method={args.method!r}, best of {args.repeat} interleaved repeats "
          "(times and speed-ups; the last column is the ratio of the medians)")
    head = ("workload", "atoms", "pairs/frame", "frames", "serial s",
            f"multiprocessing ({args.cpu_workers}) s", f"node ({args.cpu_workers} CPU workers) s",
            f"node ({args.readers} readers + 1 CPU worker) s",
            "mp speed-up", "node speed-up", "node speed-up (medians)",
            "readers speed-up", "readers speed-up (medians)")
    print_table(head, rows, args)


def mode_scaling(args):
    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.backends.topology import detect_topology
    from mdakit_fastrdf.backends import DaskDistributedBackend, NodeBackend

    os.makedirs(args.cache, exist_ok=True)
    path = os.path.join(args.cache, f"bench_{args.atoms}_{args.frames}.dcd")
    u = generate(path, args.atoms, args.frames, "DCD")
    sel = u.atoms[: args.sel_atoms]
    kw = dict(nbins=args.bins, range=(0.0, args.rmax), method=args.method)
    n_gpus = detect_topology().n_gpus
    gpu_counts = [g for g in (1, 2, 4, 8) if g <= n_gpus] if n_gpus else []
    if args.gpus:
        gpu_counts = [g for g in gpu_counts if g in args.gpus]
    rows, ref = [], None

    def record(label, workers, t, res, extra=""):
        nonlocal ref
        if ref is None:
            ref = res.results.count_uint64
        same = "yes" if np.array_equal(ref, res.results.count_uint64) else "NO"
        rows.append((label, workers, f"{t:.2f}", f"{args.frames / t:.2f}", same, extra))
        print(f"# {label}: {t:.2f} s {extra}", flush=True)

    if not gpu_counts or args.cpu_row:
        b = NodeBackend(gpus=None)
        t, r = best_of(lambda: InterRDF(sel, u.atoms, **kw).run(backend=b), args.repeat)
        record("node, CPU only", len(b.specs), t, r)
    for g in gpu_counts:
        for hybrid in (False, True):
            b = NodeBackend(gpus=g, hybrid=hybrid)
            t, r = best_of(lambda: InterRDF(sel, u.atoms, **kw).run(backend=b), args.repeat)
            lr = b.last_run
            extra = ("frames per worker " + "/".join(str(w["frames"]) for w in lr["workers"])
                     + f", duplicates {lr['duplicates_started']}")
            record(f"node, {g} GPU" + (" + CPU workers" if hybrid else ""),
                   ", ".join(f"{s.kind}x{s.n_threads}" for s in b.specs), t, r, extra)
    if gpu_counts and not args.no_dask:
        from distributed import Client, Nanny, Scheduler, SpecCluster

        for g in gpu_counts:
            workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {
                "CUDA_VISIBLE_DEVICES": str(i), "OMP_NUM_THREADS": "1"}}} for i in range(g)}
            cluster = SpecCluster(workers=workers, scheduler={
                "cls": Scheduler, "options": {"dashboard_address": None}})
            with cluster, Client(cluster) as client:
                client.wait_for_workers(g)
                b = DaskDistributedBackend(client, threads_per_worker=1)
                t, r = best_of(lambda: InterRDF(sel, u.atoms, **kw).run(backend=b), args.repeat)
                record(f"dask.distributed, {g} GPU worker(s)", f"{g} x gpu", t, r)
    head = ("setup", "workers", "time s", "frames/s", "counts = first row", "notes")
    print(f"\n{args.frames} frames of {args.atoms} atoms (DCD), RDF of {len(sel)} x "
          f"{args.atoms} atoms = {len(sel) * args.atoms:.3g} pairs/frame, {args.bins} bins, "
          f"0-{args.rmax} A, method={args.method!r}, best of {args.repeat}")
    print_table(head, rows, args)


_FRESH_RUN = r"""
import json, sys, time
import numpy as np
import MDAnalysis as mda
from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.backends import NodeBackend

path, fmt, n_atoms, kw, readers, gpu_threads, per_gpu, out = json.loads(sys.argv[1])
u = mda.Universe.empty(n_atoms, trajectory=True)
u.load_new(path, format=fmt)
backend = NodeBackend(readers=readers, gpu_threads=gpu_threads, workers_per_gpu=per_gpu)
t0 = time.perf_counter()
r = InterRDF(u.atoms, u.atoms, **kw).run(backend=backend)
wall = time.perf_counter() - t0
np.save(out, r.results.count_uint64)
lr = backend.last_run
print(json.dumps({"wall": wall, "first_ready_s": lr["first_ready_s"],
                  "parts_done_s": lr["parts_done_s"], "n_parts": lr["n_parts"],
                  "workers": [[w["kind"], w["start_method"], w["busy_s"], w["feed_wait_s"],
                               w["frames"]] for w in lr["workers"]],
                  "readers": len(lr["readers"])}))
"""


def _fresh_node_run(path, fmt, n_atoms, kw, args):
    """The node run as a script's first GPU work: a new interpreter that has not used CUDA
    (so its GPU workers are forked). Returns (wall of run(), timeline, counts)."""
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "counts.npy")
        spec = json.dumps([path, fmt, n_atoms, kw, args.readers, args.gpu_threads,
                           args.workers_per_gpu, out])
        proc = subprocess.run([sys.executable, "-c", _FRESH_RUN, spec], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"fresh node run failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        return info["wall"], info, np.load(out)


def _steady(timeline, n_frames):
    """Frames/s after the first part, from the times the parts finished."""
    done = timeline["parts_done_s"]
    first = (n_frames + timeline["n_parts"] - 1) // timeline["n_parts"]
    return (n_frames - first) / max(done[-1] - done[0], 1e-9)


def mode_e2e(args):
    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.analysis.coords import prepare_coordinates
    from mdakit_fastrdf.backends import NodeBackend
    from mdakit_fastrdf.engine import Engine, prepare_box

    os.makedirs(args.cache, exist_ok=True)
    rows = []
    kw = dict(nbins=args.bins, range=(0.0, args.rmax), method=args.method, device=args.device,
              precision=args.precision)
    for n_atoms in args.sizes:
        for fmt in args.formats:
            path = os.path.join(args.cache, f"bench_{n_atoms}_{args.frames}.{fmt.lower()}")
            u = generate(path, n_atoms, args.frames, fmt)
            ag = u.atoms
            label = f"{n_atoms:,} atoms, {fmt}"

            def reading():
                buf = np.empty((len(ag), 3), dtype=np.float32)
                for ts in u.trajectory:
                    buf[:] = ts.positions[ag.ix]
                return None

            t_read, _ = best_of(reading, 1)
            # The node run first, in a new interpreter (a script whose first GPU work it is)
            t_fresh, info, counts_fresh = _fresh_node_run(path, fmt, n_atoms, kw, args)
            # The device alone: one frame in memory, prepared once, histogrammed repeatedly
            # by the engine with every core packing it (the GPU worker's ceiling)
            u.trajectory[0]
            x = np.ascontiguousarray(ag.positions, dtype=np.float32)
            box = prepare_coordinates("mdanalysis", prepare_box(u.dimensions), x,
                                      (len(ag), len(ag)), args.rmax)
            edges = np.linspace(0.0, args.rmax, args.bins + 1)
            eng = Engine(args.device, args.precision, None, method=args.method)
            cnt = np.zeros((1, args.bins), dtype=np.uint64)
            off, pairs = np.array([0, len(ag)]), np.array([[0, 0]], dtype=np.int32)

            def device_alone(k=10):
                for _ in range(k):
                    eng.accumulate(x, off, pairs, edges, box, None, cnt)
                eng.synchronize()

            device_alone(2)
            t_dev, _ = best_of(device_alone, args.repeat)
            per_frame_dev = t_dev / 10
            # The kernel on frames in memory through the analysis (gather and wrap included)
            n_mem = min(args.frames, 8)
            um = generate(path, n_atoms, args.frames, fmt)
            um.transfer_to_memory(stop=n_mem)
            InterRDF(um.atoms, um.atoms, **kw).run(stop=1)
            t_mem, _ = best_of(lambda: InterRDF(um.atoms, um.atoms, **kw).run(), args.repeat)
            del um
            out, times = {}, {}
            fed_backend = NodeBackend(readers=args.readers, gpu_threads=args.gpu_threads,
                                      workers_per_gpu=args.workers_per_gpu)
            runs = {
                "serial": lambda: InterRDF(ag, ag, **kw).run(),
                "node, readers=0": lambda: InterRDF(ag, ag, **kw).run(
                    backend=NodeBackend(readers=0)),
                "node (readers), spawned": lambda: InterRDF(ag, ag, **kw).run(
                    backend=fed_backend),
            }
            for k, fn in runs.items():
                times[k], out[k] = best_of(fn, args.repeat)
            ref = out["serial"].results.count_uint64
            same = (all(np.array_equal(o.results.count_uint64, ref) for o in out.values())
                    and np.array_equal(counts_fresh, ref))
            plan = fed_backend.describe(args.device)
            print(f"# {label}: node plan\n" + "\n".join("#   " + x for x in plan.splitlines()),
                  flush=True)
            for name, tl in (("fresh process", info), ("this process", fed_backend.last_run)):
                done = tl["parts_done_s"]
                ws = tl["workers"]
                ws = [w if isinstance(w, list) else [w["kind"], w["start_method"], w["busy_s"],
                                                     w["feed_wait_s"], w["frames"]] for w in ws]
                print(f"# {label}, {name}: first worker ready {tl['first_ready_s']:.2f} s, "
                      f"parts done {done[0]:.2f} .. {done[-1]:.2f} s; "
                      + "; ".join(f"{k} worker ({m}) busy {b:.2f} s, waited for frames "
                                  f"{wt:.2f} s, {f} frames" for k, m, b, wt, f in ws),
                      flush=True)
            fps = {k: args.frames / t for k, t in times.items()}
            fps["fresh"] = args.frames / t_fresh
            steady = _steady(info, args.frames)
            rows.append((label, f"{args.frames / t_read:.1f}", f"{1 / per_frame_dev:.1f}",
                         f"{n_mem / t_mem:.1f}", f"{fps['serial']:.1f}",
                         f"{fps['node, readers=0']:.1f}", f"{fps['node (readers), spawned']:.1f}",
                         f"{fps['fresh']:.1f}", f"{info['first_ready_s']:.2f}",
                         f"{steady:.1f}", f"{steady * per_frame_dev:.0%}",
                         f"{fps['fresh'] / fps['serial']:.2f}", "yes" if same else "NO"))
            print(f"# {label}: " + ", ".join(f"{k} {v:.1f} frames/s" for k, v in fps.items()),
                  flush=True)
    print(f"\n{args.frames} frames, RDF of all atoms with all atoms, {args.bins} bins, "
          f"0-{args.rmax} A, method={args.method!r}, device={args.device!r}, "
          f"precision={args.precision!r}; best of {args.repeat} (reading alone, the fresh "
          "process: one run). Fresh process: the node run as the first GPU work of a new "
          "interpreter, whose GPU workers are forked; 'spawned': the same run in this process "
          "after it used CUDA. Steady: frames after the first part over their time. GPU busy: "
          "steady rate times the device-alone time per frame.")
    head = ("system", "reading alone, 1 process", "device alone (frame in memory)",
            "serial, frames in memory", "serial", "node, readers=0",
            "node with readers (spawned GPU worker)", "node with readers, fresh process",
            "first worker ready s", "steady (fresh)", "GPU busy (steady)",
            "fresh / serial", "counts equal")
    print_table(head, rows, args)


def print_table(head, rows, args):
    print()
    print("Command: `python " + " ".join(sys.argv) + "`")
    print(f"Machine: {machine()}")
    print(f"Date: {time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()}")
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=("cpu", "scaling", "e2e"), default="cpu")
    p.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000],
                   help="e2e: atoms of the generated systems")
    p.add_argument("--formats", nargs="*", default=["XTC", "DCD"], choices=("XTC", "DCD"),
                   help="e2e: trajectory formats")
    p.add_argument("--device", default="auto", help="e2e: the analysis's device")
    p.add_argument("--workers-per-gpu", type=int, default=1,
                   help="e2e: GPU workers per GPU of the reader rows")
    p.add_argument("--precision", default="double", choices=("single", "double"),
                   help="e2e: the analysis's precision")
    p.add_argument("--gpu-threads", default="auto",
                   type=lambda v: v if v == "auto" else int(v),
                   help="e2e: cores of the GPU worker of the reader row ('auto' or a number)")
    p.add_argument("--readers", default="auto",
                   type=lambda v: v if v == "auto" else int(v),
                   help="e2e and cpu: readers of the node backend's reader row "
                        "('auto' or a number; cpu default 2)")
    p.add_argument("--atoms", type=int, default=None,
                   help="atoms of the generated system (cpu: 200000, scaling: 1000000)")
    p.add_argument("--frames", type=int, default=None, help="frames (cpu: 100, scaling: 200)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                   "mdakit_fastrdf_bench"))
    p.add_argument("--cpu-workers", type=int, default=2)
    p.add_argument("--workloads", nargs="*", choices=("ion-ion", "ion-water", "water"),
                   help="cpu: workloads to run (default all)")
    p.add_argument("--water", type=int, default=None,
                   help="cpu: water atoms of the ion-water RDF (default: all)")
    p.add_argument("--oo", type=int, default=12000, help="cpu: atoms of the O-O RDF")
    p.add_argument("--sel-atoms", type=int, default=100000,
                   help="scaling: RDF of the first N atoms with all atoms")
    p.add_argument("--bins", type=int, default=200)
    p.add_argument("--rmax", type=float, default=20.0)
    p.add_argument("--method", default="auto", choices=("auto", "allpairs", "cells"),
                   help="pair search of the kernels (allpairs: the N^2 kernel)")
    p.add_argument("--gpus", type=int, nargs="*", help="scaling: GPU counts to run (default 1 2 4)")
    p.add_argument("--cpu-row", action="store_true", help="scaling: also a CPU-only row")
    p.add_argument("--no-dask", action="store_true")
    args = p.parse_args(argv)
    if args.mode == "cpu":
        args.atoms = args.atoms or 200_000
        args.frames = args.frames or 100
        if args.readers == "auto":
            args.readers = 2
        mode_cpu(args)
    elif args.mode == "e2e":
        args.frames = args.frames or 40
        args.rmax = 15.0 if args.rmax == 20.0 else args.rmax
        mode_e2e(args)
    else:
        args.atoms = args.atoms or 1_000_000
        args.frames = args.frames or 200
        mode_scaling(args)


if __name__ == "__main__":
    main()
