"""Periodic S(q): StructureFactor against freud (Debye, Direct), scatterkit's Saxs and
MDAnalysis InterRDF + a NumPy transform, on the same frames and q grid, in the same run.

Systems (``--system``):

``adk-ow`` (default)  the water oxygens of MDAnalysisTests' adenylate kinase in water
               (TPR/XTC, 11,084 OW atoms, rhombic dodecahedron of 80 Å, 10 frames);
``water100k``  every water atom of that system (O and H, 33,252; not the TIP4P virtual
               sites) tiled three times along the box vector a: a periodic supercell of
               99,756 atoms (240 × 80 × 80 Å rhombic-dodecahedron lattice), 10 frames. The
               supercell is the same periodic system (its lattice is a sublattice of the
               original), so every pair distance below half the smallest box width (28 Å,
               unchanged) is the original's: the liquid structure is kept exactly.

Weights: number (1 per atom; for water100k the total number–number S(q) of O and H), the
weights freud computes. q grid: bins of ``--dq`` over ``(0, --qmax)`` Å⁻¹ (centres
(k + 1/2) dq, the centres freud's Direct and scatterkit use; freud's Debye is evaluated at
the same centres).

Routes of StructureFactor, for every ``--rmax`` (``--routes`` picks some):

``transform``  the histogram route alone (``q_crossover=None``), default (cosine) window;
``joined``     the default: the direct k-space sum below q_c = 5 pi / r_max, the transform
               above (the route meant to be accurate at small q), default (cosine) window;
``joined Lorch``       the same with ``window='lorch'`` (Lorch's window over the range);
``joined no window``   the same with ``window=None`` (no window: no broadening, ripples).

Peers, each timed once (wall and process CPU time; the machine is shared, so ours take the
best of ``--repeat`` runs):

* freud ``StaticStructureFactorDebye`` on ``--debye-frames`` frames (about 80 s a frame).
  For water100k its all-pairs distance table (N^2 floats, 40 GB) does not fit memory: it
  runs on the whole system with the query points in chunks of ``--debye-chunk`` atoms
  (freud's partial form: the chunks' sums add up to the whole double sum) and on the
  ``--debye-k`` k values only (freud's cost is O(N^2) per k value). Its time for the whole
  q grid is extrapolated linearly in the number of k values: one chunk timed at K and 2K
  k values splits its time into the distance table (once) and a part per k value, which
  is scaled to the whole grid (plain linear scaling of the whole run is printed too);
* freud ``StaticStructureFactorDirect`` with k <= ``--direct-kmax`` (its cost grows as
  k_max^3: minutes per frame at k <= 10) on ``--direct-frames`` frames (default all 10:
  the accuracy target is an average over the trajectory);
* scatterkit ``Saxs`` (q <= --qmax, bins of --dq) on ``--saxs-frames`` frames (water100k:
  timing only, since scatterkit sums each element on its own, without the O-H cross
  terms, and takes the triclinic box as its diagonal);
* MDAnalysis ``InterRDF`` (r_max of the first ``--rmax``, 50 bins per Å, self pairs
  excluded) + a NumPy transform (the cosine window, written out) on ``--mda-frames``
  frames.

Accuracy: max |ΔS| against each peer on the frames the peer ran (ours rerun on them) and
the bins both have, for q >= 0.5 Å⁻¹; the issue's targets against freud's Direct averaged
over the 10 frames: |ΔS| <= 0.05 for 0.5 <= q <= 2 Å⁻¹ and 1 % at the main peak.
freud's Direct takes only a part of the reciprocal vectors with n1, n2, n3 >= 0
(``freud_direct_vectors``; tests/analysis/test_structure_factor.py shows it in a cube and in a
triclinic box), so the run also reproduces freud's S(k) with our compiled amplitudes on
exactly freud's vectors, and prints each reference's sampling error at the main peak (the
standard error of the per-frame bin means over the frames).

Usage::

    python benchmarks/bench_structure_factor.py                     # everything (~6 min)
    python benchmarks/bench_structure_factor.py --quick             # ours + freud Direct,
                                                                    # 2 frames
    python benchmarks/bench_structure_factor.py --figure docs/gallery/structure_factor.png
    python benchmarks/bench_structure_factor.py --system water100k --frames 4 --repeat 2 \
        --routes transform,joined                                   # 100k atoms (~35 min)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
from _common import best_of_cpu, describe

#: route -> (q_crossover, window)
ROUTES = {"transform": (None, "cosine"), "joined": ("auto", "cosine"),
          "joined Lorch": ("auto", "lorch"), "joined no window": ("auto", None)}


def freud_direct_vectors(box_vectors, k_max):
    """The integer n (M, 3) of the vectors freud 3.4's StaticStructureFactorDirect averages
    (num_sampled_k_points=0, k_min=0), n = 0 included (freud's first bin): the
    reconstruction that tests/analysis/test_structure_factor.py writes from freud's source, explains
    and checks against freud itself (_freud_direct_vectors), used here as it is."""
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1] / "tests"
    for folder in (str(tests), str(tests / "analysis")):  # conftest, the test module
        if folder not in sys.path:
            sys.path.insert(0, folder)
    from test_structure_factor import _freud_direct_vectors

    return _freud_direct_vectors(box_vectors, k_max)


def water_supercell(u, frames, copies=3):
    """Every water atom of `u` (O, H) tiled `copies` times along the box vector a, for
    each frame: an in-memory Universe (elements O/H) of the periodic supercell."""
    import MDAnalysis as mda
    from MDAnalysis.lib.mdamath import triclinic_box

    wat = u.select_atoms("resname SOL and not name MW")
    n = len(wat)
    coords = np.empty((len(frames), copies * n, 3), dtype=np.float32)
    dims = np.empty((len(frames), 6), dtype=np.float32)
    for i, f in enumerate(frames):
        ts = u.trajectory[f]
        h = ts.triclinic_dimensions.astype(np.float64)
        pos = wat.positions.astype(np.float64)
        for c in range(copies):
            coords[i, c * n:(c + 1) * n] = pos + c * h[0]
        dims[i] = triclinic_box(copies * h[0], h[1], h[2])
    big = mda.Universe.empty(copies * n, n_residues=copies * n, atom_resindex=np.arange(
        copies * n), trajectory=True)
    names = np.tile(wat.names, copies)
    big.add_TopologyAttr("names", names)
    big.add_TopologyAttr("elements", np.where(np.char.startswith(names.astype(str), "O"),
                                              "O", "H"))
    big.load_new(coords, order="fac", dimensions=dims)
    return big


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = "  ".join(f"{h:>{w}}" for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(f"{c!s:>{w}}" for c, w in zip(r, widths)))
    sys.stdout.flush()


def numpy_transform(g, edges, q, rho_pairs):
    """NumPy: 1 + rho' sum_k V_k (g_k - 1) W(r_k) sinc(q r_k), W the cosine taper over the
    second half of the range (1, then (1 + cos(pi (r - R/2) / (R/2))) / 2)."""
    r = 0.5 * (edges[:-1] + edges[1:])
    shell = 4.0 / 3.0 * np.pi * np.diff(edges ** 3)
    half = edges[-1] / 2.0
    w = np.where(r <= half, 1.0, 0.5 * (1.0 + np.cos(np.pi * (r - half) / half)))
    return 1.0 + rho_pairs * (np.sinc(np.outer(q, r) / np.pi) @ (shell * (g - 1.0) * w))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--system", choices=("adk-ow", "water100k"), default="adk-ow")
    p.add_argument("--routes", default=",".join(ROUTES),
                   help="comma-separated routes of ours (see the docstring)")
    p.add_argument("--debye-k", default="2.875,4.975",
                   help="water100k: the k values (bin centres) freud's Debye runs on")
    p.add_argument("--debye-chunk", type=int, default=10000,
                   help="water100k: query points per freud Debye call")
    p.add_argument("--frames", type=int, default=10)
    p.add_argument("--rmax", default="12,24", help="comma-separated r_max values (Å)")
    p.add_argument("--qmax", type=float, default=6.0)
    p.add_argument("--dq", type=float, default=0.05)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--precision", default="double,single")
    p.add_argument("--debye-frames", type=int, default=1)
    p.add_argument("--direct-frames", type=int, default=None,
                   help="default 10 (adk-ow), 0 (water100k)")
    p.add_argument("--direct-kmax", type=float, default=3.2)
    p.add_argument("--saxs-frames", type=int, default=None,
                   help="default 2 (adk-ow), 1 (water100k)")
    p.add_argument("--mda-frames", type=int, default=None,
                   help="default 2 (adk-ow), 0 (water100k)")
    p.add_argument("--quick", action="store_true",
                   help="ours and freud Direct only, on 2 frames")
    p.add_argument("--figure", default=None, help="write the comparison figure here")
    args = p.parse_args()
    big = args.system == "water100k"
    for name, adk, water in (("direct_frames", 10, 0), ("saxs_frames", 2, 1),
                             ("mda_frames", 2, 0)):
        if getattr(args, name) is None:
            setattr(args, name, water if big else adk)
    if args.quick:
        args.frames = args.direct_frames = 2
        args.debye_frames = args.saxs_frames = args.mda_frames = 0
    for name in args.routes.split(","):
        if name not in ROUTES:
            p.error(f"--routes: {name!r} is not one of {', '.join(ROUTES)}")
    routes = args.routes.split(",")
    if not {"transform", "joined"} <= set(routes):
        p.error("--routes must include transform and joined (the two the targets name)")

    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC

    from mdakit_fastrdf import StructureFactor

    warnings.filterwarnings("ignore")
    print("# bench_structure_factor.py")
    print(f"- command: python {' '.join(sys.argv)}")
    print(f"- machine: {describe()}")
    u = mda.Universe(TPR, XTC)
    frames = list(range(min(args.frames, len(u.trajectory))))
    if args.system == "water100k":
        w0, c0 = time.perf_counter(), time.process_time()
        u = water_supercell(u, frames)
        print(f"- supercell built in {time.perf_counter() - w0:.1f} s "
              f"({time.process_time() - c0:.1f} s CPU)")
        ow = u.atoms
        label = "water (O, H) of adk tiled 3 times along a"
    else:
        ow = u.select_atoms("name OW")
        label = "adk water oxygens"
    n_atoms = len(ow)
    qbins = round(args.qmax / args.dq)
    edges = np.linspace(0.0, qbins * args.dq, qbins + 1)
    q = 0.5 * (edges[:-1] + edges[1:])
    rmaxes = [float(x) for x in args.rmax.split(",")]
    precisions = args.precision.split(",")
    print(f"- system: {label}, {n_atoms} atoms, box {u.dimensions.round(2)}, "
          f"{len(frames)} frames; q bins of {args.dq} over (0, {q[-1] + args.dq / 2:g}) Å⁻¹; "
          "number weights; times: wall and process CPU time (all threads)")

    def ours(rmax, route, precision, run_frames):
        crossover, window = ROUTES[route]
        return StructureFactor(ow, nbins=round(rmax * 100), range=(0.0, rmax),
                               q_range=(0.0, edges[-1]), qbins=qbins, window=window,
                               q_crossover=crossover, precision=precision).run(
                                   frames=run_frames)

    # -- ours ------------------------------------------------------------------------------
    rows, results, cpu_of = [], {}, {}
    for rmax in rmaxes:
        for route in routes:
            for precision in precisions:
                wall, cpu, sf = best_of_cpu(
                    lambda r=rmax, c=route, p=precision: ours(r, c, p, frames),
                    args.repeat)
                results[(rmax, route, precision)] = sf
                cpu_of[(rmax, route, precision)] = cpu / len(frames)
                qc = sf.results.q_crossover
                rows.append([f"{route} r_max {rmax:g}", precision,
                             "-" if qc is None else f"{qc:.3f}",
                             f"{wall / len(frames) * 1e3:.1f}",
                             f"{cpu / len(frames) * 1e3:.1f}"])
    table(f"StructureFactor, {len(frames)} frames (best of {args.repeat} runs)",
          ["route", "precision", "q_c (1/Å)", "wall ms/frame", "CPU ms/frame"], rows)
    main_key = (rmaxes[-1], "joined", precisions[0])
    hist_key = (rmaxes[0], "transform", precisions[-1])

    # -- peers -----------------------------------------------------------------------------
    peers = {}  # name -> (frames, q, S, wall per frame, cpu per frame, note)
    import freud

    def freud_box(ts):
        return freud.box.Box.from_matrix(ts.triclinic_dimensions.T.astype(np.float64))

    if args.direct_frames:
        kq = q[q + args.dq / 2 <= args.direct_kmax + 1e-9]
        nb = len(kq)
        fr = frames[:args.direct_frames]

        def run_direct():
            sd = freud.diffraction.StaticStructureFactorDirect(bins=nb, k_max=nb * args.dq,
                                                              k_min=0.0)
            for k, f in enumerate(fr):
                ts = u.trajectory[f]
                sd.compute((freud_box(ts), ow.positions.copy()), reset=(k == 0))
            return sd

        wall, cpu, sd = best_of_cpu(run_direct, 1)
        assert np.allclose(sd.bin_centers, kq, atol=1e-5)
        # its sampling: the vectors with n >= 0 in each bin (orthogonal-free count)
        peers["freud Direct"] = (fr, kq, np.asarray(sd.S_k, dtype=np.float64),
                                 wall / len(fr), cpu / len(fr), f"k <= {nb * args.dq:g}")
    debye_note = None
    if args.debye_frames and args.system == "water100k":
        # the N^2 distance table does not fit: query points in chunks, few k values
        ks = np.array([float(x) for x in args.debye_k.split(",")])
        kidx = np.rint(ks / args.dq - 0.5).astype(int)
        assert np.allclose(q[kidx], ks, atol=1e-9), "--debye-k must be bin centres"
        assert len(ks) >= 2 and np.allclose(np.diff(ks), ks[1] - ks[0]), \
            "--debye-k: evenly spaced values (freud's k grid)"
        fr = frames[:args.debye_frames]
        chunks = [np.arange(i, min(i + args.debye_chunk, n_atoms))
                  for i in range(0, n_atoms, args.debye_chunk)]

        def debye_chunk(pos, box, idx, nk):
            sdb = freud.diffraction.StaticStructureFactorDebye(num_k_values=nk,
                                                              k_max=ks[-1], k_min=ks[0])
            sdb.compute((box, pos), query_points=pos[idx], N_total=n_atoms)
            return np.asarray(sdb.S_k, dtype=np.float64)

        def run_debye():
            total = np.zeros(len(ks))
            for f in fr:
                ts = u.trajectory[f]
                pos = ow.positions.copy()
                for idx in chunks:
                    total += debye_chunk(pos, freud_box(ts), idx, len(ks))
            return total / len(fr)

        wall, cpu, s_few = best_of_cpu(run_debye, 1)
        # calibration on one chunk: time = d + K s (d: the distance table; s: one k value)
        ts = u.trajectory[fr[0]]
        pos = ow.positions.copy()
        cal = {}
        for nk in (len(ks), 2 * len(ks)):
            cw, cc, _ = best_of_cpu(lambda nk=nk: debye_chunk(pos, freud_box(ts), chunks[0], nk), 1)
            cal[nk] = cc
        per_k = (cal[2 * len(ks)] - cal[len(ks)]) / len(ks)
        fixed = max(cal[len(ks)] - len(ks) * per_k, 0.0)
        scale = n_atoms / len(chunks[0])  # the cost is linear in the query points
        cpu_split = scale * (fixed + qbins * per_k)
        cpu_linear = cpu / len(fr) * qbins / len(ks)
        s_full = np.full(qbins, np.nan)
        s_full[kidx] = s_few
        debye_note = (
            f"freud Debye, water100k: {len(chunks)} chunks of <= {args.debye_chunk} query "
            f"points x {n_atoms} points, k = {', '.join(f'{k:g}' for k in ks)} only: "
            f"{cpu / len(fr):.1f} s CPU ({wall / len(fr):.1f} s wall) per frame for "
            f"{len(ks)} k values. One chunk at {len(ks)} and {2 * len(ks)} k values: "
            f"{cal[len(ks)]:.2f} and {cal[2 * len(ks)]:.2f} s CPU -> distance table "
            f"{fixed:.2f} s + {per_k:.2f} s per k value per chunk. Whole grid ({qbins} k "
            f"values), extrapolated: {cpu_split:.0f} s CPU per frame (distances once, the "
            f"per-k part x {qbins}); plain linear scaling of the run in the number of k "
            f"values: {cpu_linear:.0f} s. The ratios below take the first (smaller).")
        print(f"\n{debye_note}")
        peers["freud Debye"] = (fr, q, s_full, wall / len(fr) * cpu_split / cpu * len(fr),
                                cpu_split, f"all pairs, no window, {len(ks)} k values "
                                f"measured, whole grid extrapolated")
    elif args.debye_frames:
        fr = frames[:args.debye_frames]

        def run_debye():
            sdb = freud.diffraction.StaticStructureFactorDebye(num_k_values=qbins,
                                                              k_max=q[-1], k_min=q[0])
            for k, f in enumerate(fr):
                ts = u.trajectory[f]
                sdb.compute((freud_box(ts), ow.positions.copy()), reset=(k == 0))
            return sdb

        wall, cpu, sdb = best_of_cpu(run_debye, 1)
        peers["freud Debye"] = (fr, q, np.asarray(sdb.S_k, dtype=np.float64),
                                wall / len(fr), cpu / len(fr), "all pairs, no window")
    if args.saxs_frames:
        from scatterkit import Saxs

        fr = frames[:args.saxs_frames]
        wall, cpu, saxs = best_of_cpu(lambda: Saxs(ow, qmin=0.0, qmax=edges[-1], dq=args.dq,
                                                   output="/tmp/bench_sq.dat").run(frames=fr), 1)
        sq, ss = saxs.results.scattering_vectors, saxs.results.structure_factors
        idx = np.rint(sq / args.dq - 0.5).astype(int)
        s_full = np.full(qbins, np.nan)
        ok = (idx >= 0) & (idx < qbins)
        s_full[idx[ok]] = ss[ok]
        if big:  # per element, no cross terms, diagonal box: not this S(q)
            s_full[:] = np.nan
        peers["scatterkit Saxs"] = (fr, q, s_full, wall / len(fr), cpu / len(fr),
                                    f"q <= {edges[-1]:g}" + (", timing only" if big else ""))
    if args.mda_frames:
        from MDAnalysis.analysis.rdf import InterRDF

        rmax = rmaxes[0]
        fr = frames[:args.mda_frames]

        def run_mda():
            rdf = InterRDF(ow, ow, nbins=int(rmax * 50), range=(0.0, rmax),
                           exclusion_block=(1, 1)).run(frames=fr)
            vol = np.mean([u.trajectory[f].volume for f in fr])
            rho_pairs = n_atoms / vol * (1.0 - 1.0 / n_atoms)
            return numpy_transform(rdf.results.rdf, rdf.results.edges, q, rho_pairs)

        wall, cpu, s_mda = best_of_cpu(run_mda, 1)
        peers["InterRDF + NumPy"] = (fr, q, s_mda, wall / len(fr), cpu / len(fr),
                                     f"r_max {rmax:g}, cosine window")

    # -- time and accuracy against each peer -----------------------------------------------------
    t_hist, t_join = cpu_of[hist_key], cpu_of[main_key]
    rows = [[f"ours: transform r_max {hist_key[0]:g} ({hist_key[2]})", len(frames),
             f"{t_hist:.4f}", "", "1", "", "", "", ""],
            [f"ours: joined r_max {main_key[0]:g} ({main_key[2]})", len(frames),
             f"{t_join:.4f}", "", "", "1", "", "", ""]]
    for name, (fr, pq, ps, wall, cpu, note) in peers.items():
        mine = {}
        for route, key in (("transform", hist_key), ("joined", main_key)):
            sf = results[key] if len(fr) == len(frames) else ours(*key, fr)
            sel = np.isin(np.round(sf.results.q, 6), np.round(pq, 6))
            mine[route] = sf.results.s[sel]
        dev = []
        for route, qlo in (("transform", 0.5), ("joined", 0.5), ("transform", 2.0)):
            both = np.isfinite(ps) & np.isfinite(mine[route]) & (pq >= qlo - 1e-9)
            dev.append(f"{np.max(np.abs(mine[route][both] - ps[both])):.3f}" if both.any()
                       else "-")
        rows.append([f"{name} ({note})", len(fr), f"{cpu:.2f}", f"{wall:.2f}",
                     f"{cpu / t_hist:.0f}", f"{cpu / t_join:.0f}", *dev])
    table("Time per frame (s; ratios of CPU time) and max |ΔS| on the frames each peer ran",
          ["tool", "frames", "CPU s/frame", "wall s/frame", "x transform", "x joined",
           "max|ΔS| transform q>=0.5", "joined q>=0.5", "transform q>=2"], rows)

    # -- targets against freud Direct and the all-vector direct sum ----------------------------------
    if "freud Direct" in peers:
        fr, pq, ps, *_ = peers["freud Direct"]
        # the exact direct S(k) on every reciprocal vector up to the same k (our compiled
        # k-space sum, checked against NumPy in the tests): free of freud's sampling
        ROUTES["all vectors"] = (pq[-1] + 1.0, "cosine")  # every bin direct: no window
        wall_full, cpu_full, full = best_of_cpu(lambda: ours(rmaxes[0], "all vectors",
                                                                 precisions[0], fr), 1)
        pf = full.results.s[:len(pq)]
        print(f"\nall-vector direct S(k) up to {pq[-1] + args.dq / 2:g} Å⁻¹: "
              f"{wall_full / len(fr):.2f} s/frame wall, {cpu_full / len(fr):.2f} s CPU")
        if args.system == "adk-ow":
            freud_reproduced(u, ow, fr, pq, args.dq, ps, full)
        for ref_name, ref in (("freud Direct", ps), ("all-vector direct", pf)):
            rows = []
            for key in [(r, route, precisions[0]) for r in rmaxes for route in routes]:
                if key not in results:
                    continue
                sf = results[key] if len(fr) == len(frames) else ours(*key, fr)
                s = sf.results.s[:len(pq)]
                win = (pq >= 0.5 - 1e-9) & (pq <= 2.0 + 1e-9)
                dmax = np.nanmax(np.abs(s[win] - ref[win]))
                row = [f"{key[1]} r_max {key[0]:g}", f"{dmax:.3f}",
                       "yes" if dmax <= 0.05 else "no"]
                near = (pq > 1.5) & np.isfinite(ref)
                if near.any():  # the main peak: the largest S beyond 1.5 Å⁻¹
                    peak = int(np.argmax(np.where(near, ref, -np.inf)))
                    rel = (s[peak] - ref[peak]) / ref[peak]
                    row += [f"{pq[peak]:.3f}", f"{ref[peak]:.4f}", f"{s[peak]:.4f}",
                            f"{100 * rel:+.2f}", "yes" if abs(rel) <= 0.01 else "no"]
                else:
                    row += ["-"] * 5
                rows.append(row)
            table(f"Targets against {ref_name} ({len(fr)} frames): |ΔS| <= 0.05 for "
                  "0.5 <= q <= 2, main peak within 1 %",
                  ["ours", "max|ΔS| 0.5-2", "<= 0.05", "peak q", "ref S", "ours S", "Δ %",
                   "<= 1 %"], rows)
        d = np.abs(ps - pf)
        win = (pq >= 0.5 - 1e-9) & (pq <= 2.0 + 1e-9)
        print(f"\nfreud Direct against the all-vector direct sum: max |ΔS| {np.nanmax(d[win]):.3f}"
              f" for 0.5 <= q <= 2 (freud samples a subset of the vectors: see the docstring)")
        if args.figure:
            make_figure(args.figure, results, rmaxes, precisions[0], pq, ps, pf, fr)


def freud_reproduced(u, ow, fr, pq, dq, ps, full):
    """freud's direct S(k) from our compiled amplitudes on exactly freud's vectors
    (freud_direct_vectors), on the same frames and bins; and the sampling error of freud's
    and of the every-vector sum at the main peak (standard error of the per-frame bin
    means over the frames)."""
    from mdakit_fastrdf.engine.kspace import KSpaceEngine

    nb, n = len(pq), len(ow)
    qe = np.linspace(0.0, nb * dq, nb + 1)
    engine = KSpaceEngine(device="cpu")
    fsum, fcnt = np.zeros((len(fr), nb)), np.zeros((len(fr), nb))
    w0, c0 = time.perf_counter(), time.process_time()
    for i, f in enumerate(fr):
        h = u.trajectory[f].triclinic_dimensions.astype(np.float64)
        nv = freud_direct_vectors(h, qe[-1])
        nv = nv[np.any(nv != 0, axis=1)]
        k = np.linalg.norm(2 * np.pi * nv @ np.linalg.inv(h).T, axis=1)
        amp = engine.amplitudes(ow.positions, np.array([0, n]), h, nv)[0]
        ib = np.searchsorted(qe, k, side="right") - 1
        ok = ib < nb
        fsum[i] = np.bincount(ib[ok], np.abs(amp[ok]) ** 2 / n, nb)
        fcnt[i] = np.bincount(ib[ok], minlength=nb)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    with np.errstate(invalid="ignore", divide="ignore"):
        mine = fsum.sum(0) / fcnt.sum(0)
        per_frame = fsum / fcnt
    both = np.isfinite(mine) & (np.arange(nb) > 0)  # freud's bin 0 holds k = 0
    d = np.abs(mine[both] - ps[both])
    print(f"\nfreud's Direct reproduced by our amplitudes on freud's own vectors "
          f"({int(fcnt[0].sum())} vectors in frame {fr[0]}, {len(fr)} frames; "
          f"{cpu / len(fr):.3f} s CPU per frame): max |ΔS| {d.max():.2e}, max relative "
          f"{np.max(d / np.abs(ps[both])):.2e} over {both.sum()} bins")
    # the sampling error of each reference at the main peak
    sums = full.results.frame_kspace_sum[:, 0, :nb]
    cnt = full.results.frame_kspace_count[:, :nb]
    with np.errstate(invalid="ignore", divide="ignore"):
        all_frame = sums / cnt / n
    ref = full.results.s[:nb]
    peak = int(np.argmax(np.where(pq > 1.5, ref, -np.inf)))
    rows = []
    for name, value, frame_values, counts in (
            ("freud's vectors", mine[peak], per_frame[:, peak], fcnt[:, peak]),
            ("every vector", ref[peak], all_frame[:, peak], cnt[:, peak])):
        sem = frame_values.std(ddof=1) / np.sqrt(len(fr))
        rows.append([name, f"{counts.mean():.0f}", f"{value:.4f}", f"{sem:.4f}",
                     f"{100 * sem / value:.2f}",
                     f"{100 / np.sqrt(counts.sum()):.2f}"])
    table(f"The main peak (q = {pq[peak]:.3f}) of the two direct references, {len(fr)} "
          "frames", ["vectors", "per frame", "S", "SEM over frames", "SEM %",
                     "1/sqrt(M F) %"], rows)
    diff = mine[peak] - ref[peak]
    comb = np.hypot(*[per_frame[:, peak].std(ddof=1), all_frame[:, peak].std(ddof=1)]) \
        / np.sqrt(len(fr))
    print(f"freud's vectors - every vector at the peak: {diff:+.4f} "
          f"({100 * diff / ref[peak]:+.2f} %, {diff / comb:+.1f} combined SEM)")


def make_figure(path, results, rmaxes, precision, pq, ps, pf, fr):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, dax) = plt.subplots(2, 1, figsize=(6.4, 6.0), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1.4]},
                                  layout="constrained")
    ax.plot(pq, ps, "o", ms=3, color="black", label=f"freud Direct ({len(fr)} frames)")
    ax.plot(pq, pf, "s", ms=2.5, mfc="none", color="tab:green",
            label="direct sum, every vector (ours)")
    colors = {"transform": "tab:orange", "joined": "tab:blue", "joined Lorch": "tab:purple",
              "joined no window": "tab:red"}
    styles = {rmaxes[0]: ":", rmaxes[-1]: "-"}
    for rmax in rmaxes:
        for route in colors:
            if (rmax, route, precision) not in results:
                continue
            sf = results[(rmax, route, precision)]
            shown = route + (", cosine" if ROUTES[route][1] == "cosine" else "")
            label = (f"{shown}, r_max {rmax:g} Å" + (
                f" (k-space below {sf.results.q_crossover:.2f})" if route != "transform"
                else ""))
            ax.plot(sf.results.q, sf.results.s, styles.get(rmax, "--"), color=colors[route],
                    label=label)
            d = sf.results.s[:len(pq)] - pf
            dax.plot(pq, d, styles.get(rmax, "--"), color=colors[route])
    dax.plot(pq, ps - pf, "o", ms=2, color="black")
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_ylim(0, 1.6)
    ax.set_ylabel("S(q)")
    ax.set_title("adk water oxygens: S(q) against freud's direct S(k)")
    ax.legend(fontsize="small", frameon=False)
    dax.axhline(0, color="0.6", lw=0.8)
    dax.axhspan(-0.05, 0.05, color="0.9")
    dax.set_ylim(-0.3, 0.3)
    dax.set_xlim(0, 6)
    dax.set_xlabel("q (Å$^{-1}$)")
    dax.set_ylabel("− direct, every vector")
    fig.savefig(path, dpi=150)
    print(f"\nfigure: {path}")


if __name__ == "__main__":
    main()
