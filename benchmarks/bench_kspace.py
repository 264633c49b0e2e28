"""The direct k-space sum S(k) (mdakit_fastrdf.engine.kspace) against freud's
StaticStructureFactorDirect and scatterkit's Saxs, in the same run.

Sections:

``adk`` (default)
    One frame of the adk water oxygens (MDAnalysisTests TPR/XTC, 11,084 atoms, triclinic box
    80 x 80 x 56.6 Å): S(k) = |A(k)|^2 / N for every reciprocal lattice vector with
    |k| <= q_max (``--qmax``, default 2 and 3.2 / Å), shell-averaged (dq 0.1), against

    * freud ``StaticStructureFactorDirect(bins, k_max=q_max)`` (all of its vectors: the
      octant n >= 0, about a quarter of ours);
    * scatterkit ``Saxs(qmax=q_max, dq=0.1)`` (octant h, k, l >= 0 of the box's diagonal:
      it treats the cell as orthorhombic), one frame through ``run(stop=1)``.

    Ours also on the octant vectors (freud's count), for a like-for-like rate. Times: best
    wall time of ``--repeat`` runs (the machine is shared: best-of, and the process CPU time
    of ours beside it); ratios are peer time / our time. The rate is in k-atom terms per
    second (one complex exp(i k.r) multiply-add of the naive sum per term; the kernel makes
    two terms from four multiplications and four additions).
``gpu``
    ``--device cuda`` (the GPU machine): a 300,000-atom random system in 9 species (cubic box
    of 144 Å), q <= 1 and 2 / Å, and the adk water oxygens at q <= 3.2 / Å; GPU time against
    the CPU of the same machine in the same run.

Usage::

    python benchmarks/bench_kspace.py                    # adk, q_max 2 and 3.2
    python benchmarks/bench_kspace.py adk --qmax 2 --repeat 5 --no-freud
    python benchmarks/bench_kspace.py adk --threads 1          # every tool on one thread: on a
                                                             # loaded machine compare "cpu"
    python benchmarks/bench_kspace.py gpu --device cuda
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
from _common import best_of_cpu, describe


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


def shell_average(s, q, dq, q_max):
    edges = np.arange(0.0, q_max + dq / 2, dq)
    idx = np.digitize(q, edges) - 1
    return np.array([s[idx == b].mean() if np.any(idx == b) else np.nan for b in range(len(edges) - 1)])


def section_adk(args):
    import MDAnalysis as mda
    from MDAnalysis.lib.mdamath import triclinic_vectors
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = mda.Universe(TPR, XTC)
    ow = u.select_atoms("name OW")
    box = triclinic_vectors(u.dimensions).astype(np.float64)
    pos = ow.positions
    n_atoms = len(ow)
    eng = KSpaceEngine(device="cpu", n_threads=args.threads)
    print(f"machine: {describe()}")
    print(f"adk water oxygens: {n_atoms} atoms, box {np.round(u.dimensions, 2).tolist()}, one frame")
    rows = []
    for q_max in args.qmax:
        def ours(n=None, q=None, q_max=q_max):
            if n is None:
                n, q = reciprocal_vectors(box, q_max)
            amp = eng.amplitudes(pos, [0, n_atoms], box, n)[0]
            return shell_average(np.abs(amp) ** 2 / n_atoms, q, 0.1, q_max), len(n)

        eng.amplitudes(pos, [0, n_atoms], box, reciprocal_vectors(box, q_max)[0])  # warm-up
        t_ours, c_ours, (s_ours, m_ours) = best_of_cpu(ours, args.repeat)
        rate = n_atoms * m_ours / t_ours
        rows.append([f"{q_max:g}", "mdakit_fastrdf (all vectors)", m_ours, f"{t_ours:.3f}",
                     f"{c_ours:.3f}", "1", f"{rate / 1e9:.2f}"])
        n_all, q_all = reciprocal_vectors(box, q_max)
        octant = np.all(n_all >= 0, axis=1)
        t_oct, c_oct, (_, m_oct) = best_of_cpu(lambda n=n_all[octant], q=q_all[octant]: ours(n, q), args.repeat)
        rows.append([f"{q_max:g}", "mdakit_fastrdf (octant)", m_oct, f"{t_oct:.3f}", f"{c_oct:.3f}",
                     "-", f"{n_atoms * m_oct / t_oct / 1e9:.2f}"])
        if not args.no_freud:
            import freud

            if args.threads:
                freud.parallel.set_num_threads(args.threads)
            fbox = freud.box.Box.from_matrix(box.T)
            wrapped = fbox.wrap(pos)

            def run_freud(q_max=q_max, fbox=fbox, wrapped=wrapped):
                sf = freud.diffraction.StaticStructureFactorDirect(bins=round(q_max / 0.1), k_max=q_max)
                sf.compute((fbox, wrapped))
                return sf.S_k

            t_f, c_f, s_f = best_of_cpu(run_freud, args.peer_repeat)
            rows.append([f"{q_max:g}", "freud Direct (octant)", "~" + str(m_oct), f"{t_f:.3f}",
                         f"{c_f:.3f}", f"{t_f / t_ours:.0f}x (octant {t_f / t_oct:.0f}x; cpu {c_f / c_ours:.0f}x)",
                         f"{n_atoms * m_oct / t_f / 1e9:.3f}"])
            valid = np.isfinite(s_ours) & np.isfinite(s_f)
            print(f"q_max {q_max}: max |S_ours - S_freud| over the 0.1 shells: "
                  f"{np.abs(s_ours[valid] - s_f[valid])[1:].max():.3f} (different vector sets: "
                  "ours all directions, freud an octant)")
        if not args.no_scatterkit:
            from scatterkit import Saxs

            lengths = np.diag(box)
            maxn = np.ceil(q_max / (2 * np.pi / lengths)).astype(int)
            g = np.stack(np.meshgrid(*[np.arange(m) for m in maxn], indexing="ij"), -1).reshape(-1, 3)
            qq = np.linalg.norm(g * (2 * np.pi / lengths), axis=1)
            m_sk = int(np.count_nonzero((qq > 0) & (qq <= q_max)))

            def run_scatterkit(q_max=q_max):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    s = Saxs(ow, qmax=q_max, dq=0.1, output=os.devnull)
                    s.run(stop=1)
                return s

            t_s, c_s, _ = best_of_cpu(run_scatterkit, args.peer_repeat)
            rows.append([f"{q_max:g}", "scatterkit Saxs (octant, diag box)", m_sk, f"{t_s:.3f}",
                         f"{c_s:.3f}", f"{t_s / t_ours:.0f}x (octant {t_s / t_oct:.0f}x; cpu {c_s / c_ours:.0f}x)",
                         f"{n_atoms * m_sk / t_s / 1e9:.3f}"])
    table("S(k) of one frame (time: best wall s of the repeats; cpu: process CPU s of that run; "
          "ratio: peer time / ours)",
          ["q_max", "route", "vectors", "time", "cpu", "ratio", "G k-atom/s"], rows)


def section_gpu(args):
    import MDAnalysis as mda
    from MDAnalysis.lib.mdamath import triclinic_vectors
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf.engine import cuda_devices
    from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors

    print(f"machine: {describe()}")
    print(f"GPU: {[d['name'] for d in cuda_devices()]}")
    gpu = KSpaceEngine(device=args.device)
    cpu = KSpaceEngine(device="cpu", n_threads=args.threads)
    rng = np.random.default_rng(0)
    big = rng.random((300_000, 3)) * 144.0
    cases = [("300k atoms, 9 species", big, np.linspace(0, 300_000, 10).astype(np.int64),
              np.diag([144.0] * 3), q) for q in (1.0, 2.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = mda.Universe(TPR, XTC)
    ow = u.select_atoms("name OW")
    cases.append(("adk water oxygens", ow.positions, np.array([0, len(ow)]),
                  triclinic_vectors(u.dimensions).astype(np.float64), 3.2))
    rows = []
    for name, pos, off, box, q_max in cases:
        n, _ = reciprocal_vectors(box, q_max)
        gpu.amplitudes(pos, off, box, n)  # warm-up: buffers, tasks
        args_ = (pos, off, box, n)
        t_g, _, a_g = best_of_cpu(lambda a=args_: gpu.amplitudes(*a), args.repeat)
        t_c, _, a_c = best_of_cpu(lambda a=args_: cpu.amplitudes(*a), 1)
        err = (np.abs(a_g - a_c) / np.sqrt(np.maximum(np.diff(off), 1))[:, None]).max()
        terms = len(pos) * len(n)
        rows.append([name, len(pos), len(n), f"{q_max:g}", f"{t_g * 1e3:.2f}", f"{t_c:.3f}",
                     f"{t_c / t_g:.0f}", f"{terms / t_g / 1e9:.0f}", f"{err:.1e}"])
    table(f"direct k-space sum, {args.device} vs the CPU ({args.threads or 'all'} threads) of the "
          "same machine (GPU: best of the repeats)",
          ["system", "atoms", "vectors", "q_max", "GPU ms", "CPU s", "CPU/GPU", "G k-atom/s",
           "max|GPU-CPU|/sqrt(N)"], rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", nargs="?", default="adk", choices=["adk", "gpu"])
    p.add_argument("--qmax", type=float, nargs="+", default=[2.0, 3.2])
    p.add_argument("--repeat", type=int, default=3, help="runs of ours; the best is reported")
    p.add_argument("--peer-repeat", type=int, default=1, help="runs of freud / scatterkit")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cuda", help="gpu section: the GPU ('cuda', 'cuda:1')")
    p.add_argument("--no-freud", action="store_true")
    p.add_argument("--no-scatterkit", action="store_true")
    args = p.parse_args()
    if args.threads:  # scatterkit's OpenMP reads it when its module loads
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    {"adk": section_adk, "gpu": section_gpu}[args.section](args)


if __name__ == "__main__":
    main()
