"""The GPU k-space amplitudes call, alone: ms a call and terms/s at IntermediateScattering's
vector set (the ~2,350 half-space vectors with |q| <= 1.2 1/A of a 54.3 A box), for 16 to
160,000 atoms, and the same call with a frame's host work left out (fractional coordinates
given): what Nsight Compute profiles when run under ``ncu``.

    python benchmarks/probe_kspace_gpu.py [--calls N]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_of, describe  # noqa: E402

from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=20)
ap.add_argument("--atoms", type=int, nargs="+", default=[16, 1600, 16000, 160000])
args = ap.parse_args()
L = 54.288353
rng = np.random.default_rng(0)
box = np.diag([L] * 3)
n, _ = reciprocal_vectors(box, q_max=1.2)
print(describe())
eng = KSpaceEngine(device="cuda")
cpu = KSpaceEngine(device="cpu")
print("\n| atoms | vectors | ms a call | G terms/s | max |GPU - CPU| / sqrt(N) |\n|---|---|---|---|---|")
for n_atoms in args.atoms:
    p = (rng.random((n_atoms, 3)) * L).astype(np.float32)
    o = np.array([0, n_atoms], dtype=np.int64)
    best, _ = best_of(lambda: eng.amplitudes(p, o, box, n), repeat=args.calls, warmup=1)
    diff = np.abs(eng.amplitudes(p, o, box, n) - cpu.amplitudes(p, o, box, n)).max()
    print(f"| {n_atoms} | {len(n)} | {best * 1e3:.3f} | {n_atoms * len(n) / best / 1e9:.1f} | "
          f"{diff / np.sqrt(n_atoms):.2e} |")
