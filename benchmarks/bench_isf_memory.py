"""Peak memory of the coherent F(q, t) over many frames and vectors (issue 40's memory
target: 10,000 frames x 10,000 vectors in <= 4 GB).

Workload: Brownian particles in a cubic box (MDAnalysis's MemoryReader), every shell of the
box's reciprocal spacing up to --shells of them (about 10,000 half-space vectors for 17),
lags 0 .. --lags, every frame a time origin, coherent part only. The run keeps each
frame's amplitudes (16 bytes a vector and species) and correlates the vectors a chunk at a
time (``CORRELATION_CHUNK_BYTES`` of FFT workspace). Printed: the amplitudes' size, the
process's peak resident memory (``ru_maxrss``, the positions in memory included) and the
wall time. Usage::

    python benchmarks/bench_isf_memory.py                        # 10,000 x ~10,000
    python benchmarks/bench_isf_memory.py --frames 2000          # quicker
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=10000)
    p.add_argument("--atoms", type=int, default=200)
    p.add_argument("--box", type=float, default=30.0)
    p.add_argument("--shells", type=int, default=17)
    p.add_argument("--lags", type=int, default=100)
    p.add_argument("--chunk-mib", type=float, default=None,
                   help="FFT workspace of the correlations (default: the package's; a large "
                        "value correlates every vector at once, as before the chunks)")
    args = p.parse_args(argv)

    import MDAnalysis as mda
    from _common import describe
    from MDAnalysis.coordinates.memory import MemoryReader

    from mdakit_fastrdf import IntermediateScattering
    from mdakit_fastrdf.analysis import intermediate_scattering as isf_module

    print("command: python benchmarks/" + os.path.basename(__file__) + " "
          + " ".join(argv if argv is not None else sys.argv[1:]))
    print(describe())
    rng = np.random.default_rng(0)
    x = rng.random((1, args.atoms, 3)) * args.box + np.cumsum(
        rng.normal(0.0, 0.3, (args.frames, args.atoms, 3)), axis=0)
    u = mda.Universe.empty(args.atoms, trajectory=True)
    u.load_new(np.mod(x, args.box).astype(np.float32), format=MemoryReader,
               dimensions=[args.box] * 3 + [90.0] * 3, dt=1.0)
    del x
    if args.chunk_mib is not None:
        isf_module.CORRELATION_CHUNK_BYTES = int(args.chunk_mib * 2**20)
    dq = 2 * np.pi / args.box
    q = dq * np.arange(1, args.shells + 1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # (KiB -> GiB)
    t = time.perf_counter()
    isf = IntermediateScattering(u.atoms, q=q, lags=args.lags, dq=dq, self_part=False,
                                 by={"all": u.atoms}, device="cpu").run()
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    m = int(isf.results.n_vectors.sum())
    amplitudes = args.frames * m * 16 / 2**30
    print(f"{args.atoms} atoms, {args.frames} frames, {m} vectors in {args.shells} shells, "
          f"lags 0..{args.lags}; chunk workspace "
          f"{isf_module.CORRELATION_CHUNK_BYTES / 2**20:.0f} MiB")
    print()
    print("| frames | vectors | amplitudes kept (GiB) | peak RSS before run (GiB) | "
          "peak RSS (GiB) | target (GiB) | wall (s) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.frames} | {m} | {amplitudes:.2f} | {before:.2f} | {peak:.2f} | 4.0 | "
          f"{wall:.1f} |")
    print(f"F(q, 0) of the first shells (ideal gas: ~1): "
          f"{np.round(isf.results.f_total[0, :4], 3).tolist()}")


if __name__ == "__main__":
    main()
