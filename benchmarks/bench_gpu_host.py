"""A GPU worker's frame rate against the CPUs it has: how much of a fed GPU worker's time
is its host work (packing a frame into pinned memory, planning) and how much the device's.

One ``Engine`` on frames already in memory (no reading, no wrapping: what a fed GPU
worker gets from its ring), 1M atoms of a liquid at water's atom density in a cubic box,
all pairs 0-15 Angstrom, 200 bins, each precision; the process pinned to k CPUs
(``pack_threads`` follows its affinity), k = 1, 2, 4, 8, 16. Per k: frames/s over
``--frames`` frames after 3 warm-up frames, and the mean seconds the ``accumulate`` call
took (the host's share: with the device the limit, the call waits for the copy two frames
back). The rate that stops growing with k is the device's.

    python benchmarks/bench_gpu_host.py [--atoms 1000000] [--frames 60]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, os, sys, time
t_start = time.perf_counter()
import numpy as np
from mdakit_fastrdf.engine import Engine, prepare_box, _cuda_module, cuda_unavailable_reason
t_import = time.perf_counter()
n, frames, precision, device = json.loads(sys.argv[1])
if device.startswith("cuda"):
    _cuda_module()
    cuda_unavailable_reason()
t_module = time.perf_counter()
L = (n / 0.1) ** (1 / 3)
rng = np.random.default_rng(1)
coords = [rng.random((n, 3), dtype=np.float32) * np.float32(L) for _ in range(4)]
box = prepare_box(np.array([L, L, L, 90, 90, 90], dtype=np.float32))
offsets = np.array([0, n], dtype=np.int64)
pairs = np.array([[0, 0]], dtype=np.int32)
edges = np.linspace(0.0, 15.0, 201)
out = np.zeros((1, 200), dtype=np.uint64)
e = Engine(device=device, precision=precision)
t_e0 = time.perf_counter()
e._impl = e._make_impl(offsets, pairs)
t_impl = time.perf_counter()
e.accumulate(coords[0], offsets, pairs, edges, box, None, out)
e.synchronize()
t_first = time.perf_counter()
for k in range(3):
    e.accumulate(coords[k % 4], offsets, pairs, edges, box, None, out)
e.synchronize()
calls = []
t0 = time.perf_counter()
for k in range(frames):
    c0 = time.perf_counter()
    e.accumulate(coords[k % 4], offsets, pairs, edges, box, None, out)
    calls.append(time.perf_counter() - c0)
e.synchronize()
wall = time.perf_counter() - t0
print(json.dumps({"rate": frames / wall, "call_ms": 1e3 * float(np.mean(calls)),
                  "call_median_ms": 1e3 * float(np.median(calls)),
                  "method": e.last_method, "cpus": len(os.sched_getaffinity(0)),
                  "import_s": t_import - t_start, "module_s": t_module - t_import,
                  "impl_s": t_impl - t_e0, "first_frame_s": t_first - t_impl}))
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--atoms", type=int, default=1_000_000)
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--cpus", type=int, nargs="*", default=[1, 2, 4, 8, 16])
    args = p.parse_args(argv)
    allowed = sorted(os.sched_getaffinity(0))
    rows = []
    for precision in ("double", "single"):
        for k in args.cpus:
            if k > len(allowed):
                continue
            cpus = ",".join(str(c) for c in allowed[:k])
            spec = json.dumps([args.atoms, args.frames, precision, args.device])
            proc = subprocess.run(["taskset", "-c", cpus, sys.executable, "-c", _CHILD, spec],
                                  check=False, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append((precision, k, r))
            print(f"# {precision} {k} CPUs: {r['rate']:.1f} frames/s, accumulate call "
                  f"{r['call_ms']:.2f} ms mean ({r['call_median_ms']:.2f} median), "
                  f"{r['method']}; start: import {r['import_s']:.3f} s, CUDA module and "
                  f"devices {r['module_s']:.3f} s, engine {r['impl_s']:.3f} s, first frame "
                  f"{r['first_frame_s']:.3f} s", flush=True)
    print(f"\n{args.atoms:,} atoms in memory, all pairs 0-15 A, 200 bins, {args.device}; "
          "one Engine per row, the process pinned to k CPUs\n")
    print("| precision | CPUs | frames/s | accumulate call ms (mean / median) | x 1 CPU |")
    print("|---|---|---|---|---|")
    base = {}
    for precision, k, r in rows:
        base.setdefault(precision, r["rate"])
        print(f"| {precision} | {k} | {r['rate']:.1f} | {r['call_ms']:.2f} / "
              f"{r['call_median_ms']:.2f} | {r['rate'] / base[precision]:.2f} |")


if __name__ == "__main__":
    main()
