"""Thread scaling of the CPU k-space amplitudes, and (with devices as arguments) a profile of IntermediateScattering, at IntermediateScattering's size (one
frame of 16,000 atoms over the ~1,850 half-space vectors with |q| <= 1.2 1/A of a 54.3 A
box): ms a call and terms/s per thread count.

    python benchmarks/probe_dynamics.py [cpu cuda]
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_of, describe  # noqa: E402

from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors  # noqa: E402

L = 54.288353
rng = np.random.default_rng(0)
pos = (rng.random((16000, 3)) * L).astype(np.float32)
box = np.diag([L] * 3)
n, _ = reciprocal_vectors(box, q_max=1.2)
off = np.array([0, len(pos)], dtype=np.int64)
print(describe())
print(f"{len(pos)} atoms, {len(n)} vectors")
print("| threads | ms a call | G terms/s |\n|---|---|---|")
counts = [1, 2, 4, 8, os.cpu_count()]
for t in sorted(set(c for c in counts if c <= os.cpu_count())):
    eng = KSpaceEngine(device="cpu", n_threads=t)
    best, _ = best_of(lambda: eng.amplitudes(pos, off, box, n), repeat=5, warmup=1)
    print(f"| {t} | {best * 1e3:.2f} | {len(pos) * len(n) / best / 1e9:.1f} |")

# the GPU's call: its fixed cost (16 atoms) against its cost a term, and NumPy's FFT beside
# SciPy's threaded one at the correlations' size (the vectors' 1,024-point transforms)
if "cuda" in sys.argv[1:]:
    eng = KSpaceEngine(device="cuda")
    print("\n| GPU call: atoms | vectors | ms a call | G terms/s |\n|---|---|---|---|")
    for n_atoms in (16, 1600, 16000, 160000):
        p = (rng.random((n_atoms, 3)) * L).astype(np.float32)
        o = np.array([0, n_atoms], dtype=np.int64)
        best, _ = best_of(lambda: eng.amplitudes(p, o, box, n), repeat=20, warmup=1)
        print(f"| {n_atoms} | {len(n)} | {best * 1e3:.3f} | {n_atoms * len(n) / best / 1e9:.1f} |")
    x = rng.random((len(n), 1024)) + 1j * rng.random((len(n), 1024))
    t0 = time.perf_counter()
    np.fft.fft(x, axis=1)
    t_np = time.perf_counter() - t0
    try:
        import scipy.fft

        t0 = time.perf_counter()
        scipy.fft.fft(x, axis=1, workers=os.cpu_count())
        t_sp = time.perf_counter() - t0
    except ImportError:
        t_sp = float("nan")
    print(f"\nFFT of {len(n)} x 1024 complex: NumPy {t_np * 1e3:.1f} ms, SciPy on "
          f"{os.cpu_count()} workers {t_sp * 1e3:.1f} ms")

# where a coherent IntermediateScattering run of the same size spends its time, per device
# (cProfile, top functions by own time): 500 frames of the Brownian DCD of bench_dynamics
if len(sys.argv) > 1:
    import cProfile
    import pstats

    import MDAnalysis as mda
    from bench_dynamics import shells, write_brownian

    from mdakit_fastrdf import IntermediateScattering

    path = os.path.join("/tmp", "probe_16000_500.dcd")
    if not os.path.exists(path):
        write_brownian(path, 16000, 500)
    u = mda.Universe.empty(16000, trajectory=True)
    u.load_new(path, format="DCD")
    q, dq, nv, _ = shells(float(u.dimensions[0]), 1.2)
    for device in sys.argv[1:]:
        kw = dict(q=q, lags=100, dq=dq, self_part=False, by=[u.atoms], device=device)
        IntermediateScattering(u.atoms, **{**kw, "lags": 2}).run(stop=5)
        t0 = time.perf_counter()
        IntermediateScattering(u.atoms, **kw).run()
        print(f"\n{device}: {time.perf_counter() - t0:.2f} s, {len(nv)} vectors")
        prof = cProfile.Profile()
        prof.enable()
        IntermediateScattering(u.atoms, **kw).run()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(10)
