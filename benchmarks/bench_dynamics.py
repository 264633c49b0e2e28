"""Coherent intermediate scattering F(q, t): IntermediateScattering beside dynasor, on the
same q-points and frames, in one run (issue 40's anchor).

Workload: Brownian particles at water's atom density (0.1 per cubic Angstrom, D = 0.05
A^2/ps, 1 ps between frames), written once as a DCD; every reciprocal vector of the box
with |q| <= --q-max (one of each +-k, the q-points of both tools), in shells of the box's
reciprocal spacing; lags 0 .. --window frames, every frame a time origin. dynasor's time
includes its S(q, w) (the same call); its numba compilation is excluded (a warm-up call on
a short trajectory first). The check: dynasor's F(q, t) of each q-point, averaged over the
vectors of each shell, against ours (relative difference printed; the target is 1e-6).

Usage::

    python benchmarks/bench_dynamics.py                       # N = 4000 and 16000
    python benchmarks/bench_dynamics.py --atoms 4000 --frames 100 --window 20   # quick
    python benchmarks/bench_dynamics.py --atoms 16000 --q-max 1.2 --device cpu cuda
        # issue 40's GPU case: ~2,000 q-points, ours on all cores and on the GPU, dynasor on
        # all cores, in one run

dynasor is optional (``pip install dynasor``, or the ``bench`` extra): without it only our
rows are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

DENSITY = 0.1
D = 0.05  # A^2/ps


def write_brownian(path, n_atoms, n_frames, seed=0):
    import MDAnalysis as mda

    box = (n_atoms / DENSITY) ** (1 / 3)
    rng = np.random.default_rng(seed)
    x = rng.random((n_atoms, 3)) * box
    u = mda.Universe.empty(n_atoms, trajectory=True)
    u.dimensions = [box, box, box, 90, 90, 90]
    with mda.Writer(path, n_atoms) as w:
        for _ in range(n_frames):
            u.atoms.positions = np.mod(x, box).astype(np.float32)
            u.dimensions = [box, box, box, 90, 90, 90]
            w.write(u.atoms)
            x += rng.normal(0.0, np.sqrt(2 * D * 1.0), x.shape)
    return box


def shells(box, q_max):
    """(shell centres, width, the half-space vectors' indices n and |k|): shells of the
    reciprocal spacing dq centred on its multiples (no |k| = 2 pi |n| / L falls on an edge),
    every vector up to the last whole shell below q_max."""
    from mdakit_fastrdf.engine.kspace import reciprocal_vectors

    dq = 2 * np.pi / box
    top = (np.floor(q_max / dq - 0.5) + 0.5) * dq
    n, kmag = reciprocal_vectors(np.diag([box] * 3), q_max=top)
    centres = np.unique(np.round(kmag / dq)) * dq
    return centres, dq, n, kmag


def _file_box(path, n_atoms):
    import MDAnalysis as mda

    u = mda.Universe.empty(n_atoms, trajectory=True)
    u.load_new(path, format="DCD")
    return float(u.dimensions[0])


def ours(path, n_atoms, q, dq, window, device, backend="serial"):
    import MDAnalysis as mda

    from mdakit_fastrdf import IntermediateScattering

    u = mda.Universe.empty(n_atoms, trajectory=True)
    u.load_new(path, format="DCD")
    t0 = time.perf_counter()
    run = {} if backend == "serial" else {"backend": backend}
    r = IntermediateScattering(u.atoms, q=q, lags=window, dq=dq, self_part=False, by=[u.atoms],
                               device=device).run(**run)
    return time.perf_counter() - t0, r.results


def theirs(path, n_atoms, n, box, window):
    from dynasor import Trajectory, compute_dynamic_structure_factors

    kvec = 2 * np.pi * n.astype(np.float64) / box  # cubic box: k = 2 pi n / L
    traj = Trajectory(path, trajectory_format="dcd",
                      atomic_indices={"X": list(range(n_atoms))}, length_unit="Angstrom",
                      time_unit="ps")
    t0 = time.perf_counter()
    sample = compute_dynamic_structure_factors(traj, kvec, dt=1000.0, window_size=window,
                                               logging_interval=0)
    return time.perf_counter() - t0, np.asarray(sample.Fqt_coh)  # (q-points, lags)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--atoms", type=int, nargs="*", default=[4000, 16000])
    p.add_argument("--frames", type=int, default=500)
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--q-max", type=float, default=2.0)
    p.add_argument("--device", nargs="+", default=["cpu"],
                   help="our devices, each a row against the same dynasor time (cpu, cuda)")
    p.add_argument("--backend", nargs="+", default=["serial"],
                   help="our backends, each a row (serial: run(); node: run(backend='node'), "
                        "readers feeding the device's workers)")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "fastrdf-dynamics"))
    args = p.parse_args(argv)
    try:
        import dynasor  # noqa: F401

        have = True
    except ImportError:
        have = False
        print("# dynasor is not installed: our rows only (pip install dynasor)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import describe

    threads, peers = "-", ()
    if have:
        peers = ("dynasor", "numba")
        import numba

        threads = numba.get_num_threads()  # (all the machine's cores unless NUMBA_NUM_THREADS)
    os.makedirs(args.cache, exist_ok=True)
    if have:  # numba's compilation, outside the timings
        warm = os.path.join(args.cache, "warm.dcd")
        write_brownian(warm, 200, 10)
        box = _file_box(warm, 200)
        _, _, n, _ = shells(box, 1.0)
        theirs(warm, 200, n, box, 4)
    rows = []
    for n_atoms in args.atoms:
        path = os.path.join(args.cache, f"brownian_{n_atoms}_{args.frames}.dcd")
        if not os.path.exists(path):
            write_brownian(path, n_atoms, args.frames)
        box = _file_box(path, n_atoms)  # (as the file stores it: float32)
        q, dq, n, kmag = shells(box, args.q_max)
        # ours first: dynasor's numba threads may still hold the cores after its call
        mine = []
        for device in args.device:
            for backend in args.backend:
                ours(path, n_atoms, q[:2], dq, 2, device)  # (a warm-up: the device's start)
                t_ours, res = ours(path, n_atoms, q, dq, args.window, device, backend)
                assert int(res.n_vectors.sum()) == len(n)
                mine.append((device, backend, t_ours, res))
        if have:
            t_theirs, fqt = theirs(path, n_atoms, n, box, args.window)
            lo = q - dq / 2
            ref = np.array([fqt[(kmag >= a) & (kmag < a + dq)].mean(axis=0) for a in lo]).T
        for device, backend, t_ours, res in mine:
            row = [n_atoms, len(n), len(q), f"{device}, {backend}", f"{t_ours:.2f}"]
            if have:
                diff = np.max(np.abs(ref - res.f_total) / np.maximum(np.abs(ref), 1e-3))
                row += [f"{t_theirs:.2f}", f"{t_theirs / t_ours:.1f}x",
                        f"{diff:.1e} ({'ok' if diff <= 1e-6 else 'FAILS'} at 1e-6)"]
            else:
                row += ["-", "-", "-"]
            rows.append(row)
            print("#", row, flush=True)
    print(f"\n`python {' '.join(sys.argv)}`: coherent F(q, t) of Brownian particles, "
          f"{args.frames} frames, lags 0-{args.window}, |q| <= {args.q_max} 1/A; "
          f"{describe(peers)}; dynasor's numba threads: {threads}\n")
    head = ["atoms", "q-points", "shells", "ours: device, backend", "ours s", "dynasor s", "speed-up",
            "max rel. diff (shell means)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    if any("FAILS" in str(r[-1]) for r in rows):
        sys.exit("dynasor's F(q, t) and ours differ by more than 1e-6")


if __name__ == "__main__":
    main()
