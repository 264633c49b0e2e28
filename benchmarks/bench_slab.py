"""The slab metric's cost in the kernels: each box type of LateralRDF's slab against the box
without a slab, on frames in memory (one engine call per frame, best of ``--repeat``).

A film of ``--atoms`` uniformly random atoms (thickness 25 Å, 0.08 Å^-3, box 80 Å high;
orthorhombic, or hexagonal with the same area), one species with itself, 100 bins over
0-25 Å, slab h = ``--h`` Å, cell lists (``method='cells'``) and all pairs (on a subset of
``--allpairs-atoms`` atoms). Rows: the box without a slab (``Box(ORTHO)``, ``Box(TRICLINIC)``;
every pair within r_max in 3D), and the slab boxes with the in-plane (w = 0) and 3D (w = 1)
r^2 (fewer pairs: those within |dz| <= h). Both precisions; double precision takes the
float filter on the CPU (with a slab also the band around h) and, with a slab, every pair
in double on a GPU (docs/design.rst, "The slab metric"). The counts of each row are summed
into a checksum.

    python benchmarks/bench_slab.py [--device cpu|cuda] [--atoms 1000000] [--h 1.0]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from mdakit_fastrdf.engine import (ORTHO, ORTHO_SLAB, TRICLINIC, TRICLINIC_SLAB, Box, Engine,
                                   prepare_box, wrap_positions)


def film(n_atoms, hexagonal, seed=0):
    area = 40000.0 * n_atoms / 100000  # 0.08 atoms per Å^3 in a 25 Å film
    if hexagonal:
        a = (area / np.sin(np.radians(60.0))) ** 0.5
        dims = [a, a, 80.0, 90.0, 90.0, 60.0]
    else:
        a = area ** 0.5
        dims = [a, a, 80.0, 90.0, 90.0, 90.0]
    box = prepare_box(dims)
    rng = np.random.default_rng(seed)
    frac = rng.random((n_atoms, 3))
    frac[:, 2] = (40.0 + (frac[:, 2] - 0.5) * 25.0) / 80.0
    x = (frac @ box.vectors).astype(np.float32)
    wrap_positions(x, box)
    return x, box


def time_call(engine, x, edges, box, repeat):
    offsets = np.array([0, len(x)], np.int64)
    pairs = np.array([[0, 0]], np.int32)
    out = np.zeros((1, len(edges) - 1), np.uint64)
    engine.accumulate(x, offsets, pairs, edges, box, None, out)  # warm-up
    engine.synchronize()
    best = np.inf
    for _ in range(repeat):
        out[:] = 0
        t0 = time.perf_counter()
        engine.accumulate(x, offsets, pairs, edges, box, None, out)
        engine.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, int(out.sum())


def main(argv=None):
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _common import describe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--atoms", type=int, default=1000000)
    parser.add_argument("--allpairs-atoms", type=int, default=100000)
    parser.add_argument("--h", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"# {describe()}")
    print(f"# command: python {' '.join(sys.argv)}")
    edges = np.linspace(0.0, 25.0, 101)
    print("| box | method | atoms | slab | single (ms) | double (ms) | pairs counted | "
          "single vs no slab | double vs no slab |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for hexagonal in (False, True):
        for method, n in (("cells", args.atoms), ("allpairs", args.allpairs_atoms)):
            x, box = film(n, hexagonal)
            plain_kind, slab_kind = (TRICLINIC, TRICLINIC_SLAB) if hexagonal else (ORTHO, ORTHO_SLAB)
            rows = [("none", Box(plain_kind, box.vectors32)),
                    ("h, in-plane", Box(slab_kind, box.vectors32, (args.h, 0.0))),
                    ("h, 3D", Box(slab_kind, box.vectors32, (args.h, 1.0)))]
            base = None
            for name, b in rows:
                t = {}
                for precision in ("single", "double"):
                    e = Engine(args.device, precision, method=method)
                    t[precision], count = time_call(e, x, edges, b, args.repeat)
                if base is None:
                    base = t
                print(f"| {'hexagonal' if hexagonal else 'orthorhombic'} | {method} | {n} | "
                      f"{name} | {t['single'] * 1e3:.2f} | {t['double'] * 1e3:.2f} | {count} | "
                      f"{t['single'] / base['single']:.2f} | {t['double'] / base['double']:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
