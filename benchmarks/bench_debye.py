"""Debye scattering of a protein: DebyeScattering against a NumPy/SciPy ``pdist`` Debye sum
and freud's ``StaticStructureFactorDebye``, in the same run.

The system is MDAnalysisTests' adenylate kinase (PSF/DCD: 3,341 atoms of H, C, N, O, S, no
box; elements guessed from the names), I(q) on a grid of ``--nq`` values from 0.02 to
``--qmax`` Å⁻¹, averaged over ``--frames`` frames. Routes:

``DebyeScattering xray`` / ``number``
    this package, default bins (bound below 1e-3 of the forward scattering up to q_max),
    double precision, every core (``--threads``).
``pdist exact``
    the float64 double sum: ``scipy.spatial.distance.pdist`` per frame, then
    :math:`\\sum_i f_i^2 + 2\\sum_{i<j} f_i f_j \\sin(q r_{ij})/(q r_{ij})` per q (NumPy, pairs
    taken in chunks); the reference for the accuracy column.
``pdist + histogram``
    the same algorithm as this package written in NumPy: ``pdist`` of each species pair,
    ``numpy.histogram`` with the same bins, the same sinc transform at the end.
``freud Debye``
    ``freud.diffraction.StaticStructureFactorDebye`` (form factors 1, so compared with the
    ``number`` weights). freud has no box-less mode: the protein is placed in a cubic box
    more than twice its extent, so that every minimum-image distance is the plain distance
    (checked), and ``N * S(k)`` is the Debye sum of unit weights.

Times: wall clock per frame, best of ``--repeat`` runs (the machine is shared), and the
CPU time of the process per frame (all threads; best run); ratios are the peer's time over
DebyeScattering's of the same weights, in the same run. Accuracy: max over q of
``|I - I_exact| / I_exact``.

``--generated N`` (instead of adk)
    CADISHI's F1-ATPase-like case for the GPU target of issue 28: ``N`` atoms (300,000) in 9
    species (from half of the atoms down to 0.1 %), uniform in a sphere of 140 Å radius, a
    new random frame each time, 8000 bins over 0-300 Å, 100 q up to 0.5 Å⁻¹, X-ray weights
    of C, N, O, H, S, P, Fe, Na, Cl; DebyeScattering alone (``--device cuda`` on the GPU
    machine), frames per second. No peer (4.5e10 pairs per frame).

Usage::

    python benchmarks/bench_debye.py                       # 10 frames, 50 q, q_max 1
    python benchmarks/bench_debye.py --frames 3 --nq 100 --qmax 2 --repeat 3
    python benchmarks/bench_debye.py --figure docs/gallery/adk_saxs.png
    python benchmarks/bench_debye.py --generated 300000 --device cuda --frames 20
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
from _common import best_of_cpu, describe


def universe():
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import DCD, PSF

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = mda.Universe(PSF, DCD)
    u.guess_TopologyAttrs(to_guess=["elements"])
    return u


def frames_positions(u, n_frames):
    return [ts.positions.astype(np.float64) for ts in u.trajectory[:n_frames]]


def pdist_exact(positions, weights, q, chunk=1 << 21):
    """float64 double sum over all pairs, per q; weights (N, n_q)."""
    from scipy.spatial.distance import pdist

    n = len(weights)
    out = np.zeros(len(q))
    i, j = np.triu_indices(n, 1)
    for pos in positions:
        r = pdist(pos)
        acc = (weights**2).sum(axis=0)
        for s in range(0, len(r), chunk):
            ww = weights[i[s:s + chunk]] * weights[j[s:s + chunk]]  # (chunk, n_q)
            acc = acc + 2 * np.einsum("pq,qp->q", ww,
                                      np.sinc(np.multiply.outer(q, r[s:s + chunk]) / np.pi))
        out += acc
    return out / len(positions)


def pdist_histogram(positions, species, w_species, q, edges):
    """The package's algorithm in NumPy: species-pair histograms of pdist / cdist distances,
    then the sinc transform."""
    from scipy.spatial.distance import cdist, pdist

    from mdakit_fastrdf.analysis.scattering import sinc_transform

    centres = 0.5 * (edges[1:] + edges[:-1])
    labels = np.unique(species)
    idx = [np.flatnonzero(species == s) for s in labels]
    hist = {}
    for pos in positions:
        for a in range(len(labels)):
            for b in range(a, len(labels)):
                if a == b:
                    r = pdist(pos[idx[a]])
                else:
                    r = cdist(pos[idx[a]], pos[idx[b]]).ravel()
                h, _ = np.histogram(r, bins=edges)
                hist[a, b] = hist.get((a, b), 0) + h
    out = np.zeros(len(q))
    for (a, b), h in hist.items():
        s = sinc_transform(h / len(positions), centres, q)
        out += 2 * w_species[labels[a]] * w_species[labels[b]] * s
    for a, s in enumerate(labels):
        out += len(idx[a]) * w_species[s] ** 2
    return out


def freud_debye(positions, q):
    import freud

    n_q = len(q)
    dq = (q[-1] - q[0]) / (n_q - 1)
    ext = max(np.ptp(p, axis=0).max() for p in positions)
    box = freud.box.Box.cube(2.5 * ext)
    sf = freud.diffraction.StaticStructureFactorDebye(num_k_values=n_q, k_max=q[-1] + 0 * dq,
                                                      k_min=q[0])
    out = np.zeros(n_q)
    for pos in positions:
        centred = (pos - pos.mean(axis=0)).astype(np.float32)
        sf.compute((box, centred), reset=True)
        out += len(pos) * np.asarray(sf.S_k)
    return out / len(positions), np.asarray(sf.k_values)


def generated(n_atoms, n_frames, device, repeat, precisions=("double",), seed=0):
    """Frames per second of DebyeScattering on a random 9-species sphere."""
    import MDAnalysis as mda

    from mdakit_fastrdf import DebyeScattering

    elements = ["C", "N", "O", "H", "S", "P", "Fe", "Na", "Cl"]
    fractions = np.array([0.5, 0.2, 0.12, 0.1, 0.04, 0.02, 0.01, 0.009, 0.001])
    counts = np.floor(fractions / fractions.sum() * n_atoms).astype(int)
    counts[0] += n_atoms - counts.sum()
    rng = np.random.default_rng(seed)
    u = mda.Universe.empty(n_atoms, trajectory=True)
    u.add_TopologyAttr("elements", np.repeat(elements, counts))
    frames = np.empty((n_frames, n_atoms, 3), dtype=np.float32)
    for f in range(n_frames):
        v = rng.normal(size=(n_atoms, 3))
        v *= (140.0 * rng.random(n_atoms) ** (1 / 3) / np.linalg.norm(v, axis=1))[:, None]
        frames[f] = v + 150.0
    u.load_new(frames)
    q = np.linspace(0.005, 0.5, 100)
    print(f"# generated: {n_atoms} atoms, 9 species ({[int(c) for c in counts]}), 45 species "
          f"pairs, 8000 bins over 0-300 Å, 100 q")
    print("per added frame: (frames - 2) / (time of all frames - time of 2 frames), so that the "
          "transform at the end, the same for any number of frames, drops out\n")
    print("| system | precision | device | frames | wall s (best) | frames/s | CPU s "
          "| frames/s per added frame | bapps per added frame |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    pairs = n_atoms * (n_atoms + 1) / 2
    intensity = {}
    for precision in precisions:
        d = DebyeScattering(u.atoms, q=q, nbins=8000, range=(0.0, 300.0), device=device,
                            precision=precision)
        d.run(stop=1)  # start the device, warm the caches
        wall, cpu, _ = best_of_cpu(lambda d=d: d.run(), repeat)
        wall2, _, _ = best_of_cpu(lambda d=d: d.run(stop=2), repeat)
        intensity[precision] = d.results.intensity.copy()
        steady = (n_frames - 2) / (wall - wall2) if n_frames > 2 and wall > wall2 else float("nan")
        print(f"| generated {n_atoms} | {precision} | {d.parameters()['device_used']} | "
              f"{n_frames} | {wall:.4g} | {n_frames / wall:.3g} | {cpu:.4g} | {steady:.3g} | "
              f"{pairs * steady / 1e9:.4g} |")
    if len(intensity) == 2:
        a, b = intensity.values()
        print(f"\nmax relative |ΔI| between the precisions: {np.max(np.abs(a - b) / np.abs(b)):.2e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=10)
    p.add_argument("--nq", type=int, default=50)
    p.add_argument("--qmax", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--skip-exact", action="store_true", help="no pdist exact sum (slow)")
    p.add_argument("--figure", default=None, help="write the I(q) figure here")
    p.add_argument("--generated", type=int, default=None, metavar="N",
                   help="time a random 9-species sphere of N atoms instead of adk")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", nargs="+", default=["double"], choices=("single", "double"),
                   help="--generated: the precisions to time")
    args = p.parse_args(argv)
    if args.generated:
        print(f"# {describe(('freud', 'numpy'))}")
        print(f"# command: python {' '.join(sys.argv)}")
        generated(args.generated, args.frames, args.device, args.repeat, args.precision)
        return

    from mdakit_fastrdf import DebyeScattering
    from mdakit_fastrdf.analysis.scattering import xray_form_factor

    print(f"# {describe(('freud', 'numpy'))}")
    print(f"# command: python {' '.join(sys.argv)}")
    u = universe()
    atoms = u.atoms
    q = np.linspace(0.02, args.qmax, args.nq)
    nf = args.frames
    positions = frames_positions(u, nf)
    el = np.asarray(atoms.elements)
    fx = {e: xray_form_factor(e, q) for e in np.unique(el)}
    wx = np.array([fx[e] for e in el])
    print(f"# adk: {len(atoms)} atoms, {nf} frames, {args.nq} q in [0.02, {args.qmax}] Å⁻¹")

    rows = []

    def ours(weights):
        d = DebyeScattering(atoms, q=q, weights=weights, device="cpu",
                            n_threads=args.threads)
        return d.run(stop=nf)

    wall_x, cpu_x, dx = best_of_cpu(lambda: ours("xray"), args.repeat)
    wall_n, cpu_n, dn = best_of_cpu(lambda: ours("number"), args.repeat)
    res = dx.results
    width = res.edges[1] - res.edges[0]
    print(f"# DebyeScattering bins: {len(res.bins)} of {width:.5f} Å over 0-{res.edges[-1]:.2f}"
          f" Å; max binning_error / binning_scale {np.max(res.binning_error / res.binning_scale):.2e}"
          f"; max binning_error / I {np.max(res.binning_error_relative):.2e}")

    exact_x = exact_n = None
    if not args.skip_exact:
        wall_e, cpu_e, exact_x = best_of_cpu(lambda: pdist_exact(positions, wx, q), 1)
        wall_en, cpu_en, exact_n = best_of_cpu(
            lambda: pdist_exact(positions, np.ones((len(el), len(q))), q), 1)

    def acc(i, ref):
        return "-" if ref is None else f"{np.max(np.abs(i - ref) / ref):.1e}"

    rows.append(("DebyeScattering", "xray", wall_x, cpu_x, 1.0, acc(res.intensity, exact_x)))
    rows.append(("DebyeScattering", "number", wall_n, cpu_n, 1.0,
                 acc(dn.results.intensity, exact_n)))
    if exact_x is not None:
        rows.append(("pdist exact (float64)", "xray", wall_e, cpu_e, wall_e / wall_x, "0"))
        rows.append(("pdist exact (float64)", "number", wall_en, cpu_en, wall_en / wall_n, "0"))
    wall_h, cpu_h, hist_i = best_of_cpu(
        lambda: pdist_histogram(positions, el, fx, q, res.edges), 1)
    rows.append(("pdist + histogram (NumPy)", "xray", wall_h, cpu_h, wall_h / wall_x,
                 acc(hist_i, exact_x)))
    try:
        wall_f, cpu_f, (fr_i, fr_k) = best_of_cpu(lambda: freud_debye(positions, q), 1)
        assert np.allclose(fr_k, q), "freud's k grid differs from q"
        rows.append(("freud StaticStructureFactorDebye", "number", wall_f, cpu_f,
                     wall_f / wall_n, acc(fr_i, exact_n)))
        fr_vs_ours = np.max(np.abs(fr_i - dn.results.intensity) / dn.results.intensity)
    except ImportError:
        fr_vs_ours = None

    print()
    print("| route | weights | wall s/frame (best) | CPU s/frame | wall ratio to ours "
          "| max rel. error vs exact |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, w, wall, cpu, ratio, err in rows:
        print(f"| {name} | {w} | {wall / nf:.4g} | {cpu / nf:.4g} | {ratio:.3g} | {err} |")
    if fr_vs_ours is not None:
        print(f"\nmax |I_freud - I_ours| / I_ours (number weights): {fr_vs_ours:.1e}")
    hist_vs_ours = np.max(np.abs(hist_i - res.intensity) / res.intensity)
    print(f"max |I_numpy_hist - I_ours| / I_ours (same bins): {hist_vs_ours:.1e}")

    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        sans = ours("neutron")
        ax = dx.plot(partials=False)
        ax.lines[0].set_label("I(q) X-ray (e²)")
        ax.plot(sans.results.q, sans.results.intensity, color="tab:blue",
                label="I(q) neutron (fm²)")
        if exact_x is not None:
            ax.plot(q[::3], exact_x[::3], "o", mfc="none", color="tab:red",
                    label="float64 pdist double sum")
        ax.set_ylabel("I(q) per frame (e² X-ray, fm² neutron)")
        ax.set_title(f"adenylate kinase, {len(atoms)} atoms, {nf} frames")
        ax.legend(frameon=False, fontsize="small")
        ax.figure.savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
