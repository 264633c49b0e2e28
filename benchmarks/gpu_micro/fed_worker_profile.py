"""Where a GPU worker's time goes per frame, and what a worker's start costs (issue 24).

    python benchmarks/gpu_micro/fed_worker_profile.py [--atoms 1000000] [--frames 10]

1. Start-up pieces, each in a fresh process: the interpreter with the imports a worker
   needs, and the first CUDA call (context + module load) of the engine.
2. A serial InterRDF(device='cuda') over frames in memory (the work of a fed GPU worker plus
   the gather), pinned to 1 and to 4 cores with as many threads, under cProfile: the
   functions with the most own time.
"""

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time

import numpy as np


def fresh(code):
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return time.perf_counter() - t0, out.stdout.strip(), out.stderr.strip()[-300:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--atoms", type=int, default=1_000_000)
    p.add_argument("--frames", type=int, default=10)
    args = p.parse_args()

    print("== start-up, fresh processes")
    t, _, _ = fresh("pass")
    print(f"python -c pass: {t:.3f} s")
    t, _, _ = fresh("import numpy")
    print(f"import numpy: {t:.3f} s")
    t, _, _ = fresh("import MDAnalysis")
    print(f"import MDAnalysis: {t:.3f} s")
    t, _, _ = fresh("import MDAnalysis, mdakit_fastrdf")
    print(f"import MDAnalysis, mdakit_fastrdf: {t:.3f} s")
    code = ("import time, numpy as np; t0=time.perf_counter(); "
            "from mdakit_fastrdf.engine import Engine, prepare_box; "
            "e=Engine('cuda','double',1); t1=time.perf_counter(); "
            "x=np.random.default_rng(0).random((1000,3),dtype=np.float32)*20; "
            "out=np.zeros((1,10),np.uint64); "
            "e.accumulate(x,np.array([0,1000]),np.array([[0,0]],np.int32),np.linspace(0,5,11),"
            "prepare_box(np.array([20,20,20,90,90,90],np.float32)),None,out); e.synchronize(); "
            "t2=time.perf_counter(); print(f'{t1-t0:.3f} {t2-t1:.3f}')")
    t, out, err = fresh(code)
    print(f"engine import {out.split()[0] if out else '?'} s, first CUDA frame (context, "
          f"module) {out.split()[1] if out else '?'} s; whole process {t:.3f} s {err}")

    import MDAnalysis as mda

    from mdakit_fastrdf import InterRDF

    n = args.atoms
    L = (n / 0.1) ** (1 / 3)
    rng = np.random.default_rng(1)
    coords = rng.random((args.frames, n, 3), dtype=np.float32) * np.float32(L)
    u = mda.Universe.empty(n, trajectory=True)
    u.load_new(coords, format=mda.coordinates.memory.MemoryReader,
               dimensions=np.array([L, L, L, 90, 90, 90], dtype=np.float32))
    allcpus = sorted(os.sched_getaffinity(0))
    for threads in (1, 4, len(allcpus)):
        os.sched_setaffinity(0, allcpus[:threads])
        kw = dict(nbins=200, range=(0.0, 15.0), device="cuda", n_threads=threads)
        InterRDF(u.atoms, u.atoms, **kw).run(stop=2)  # warm
        t0 = time.perf_counter()
        r = InterRDF(u.atoms, u.atoms, **kw).run()
        t = time.perf_counter() - t0
        print(f"\n== {threads} core(s): {args.frames} frames of {n} atoms in {t:.3f} s "
              f"= {1e3 * t / args.frames:.2f} ms/frame ({r.results.count_uint64.sum()} pairs)")
        prof = cProfile.Profile()
        prof.enable()
        InterRDF(u.atoms, u.atoms, **kw).run()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
        print("\n".join(s.getvalue().splitlines()[:30]))
    os.sched_setaffinity(0, allcpus)


if __name__ == "__main__":
    main()
