"""Benchmark mdakit_fastrdf against MDAnalysis InterRDF and freud.

Part A times the water oxygen-oxygen RDF of the adenylate kinase demo system of
MDAnalysisTests (11084 water oxygens, 75 bins over 0-15 Å, self pairs excluded)
with MDAnalysis's InterRDF, freud's RDF and mdakit_fastrdf's InterRDF in single
and double precision, once reading the trajectory from disk and once with the
trajectory preloaded into memory, and compares each g(r) with InterRDF's.

Part B measures the raw kernel rate in bapps (billion atom pairs per second,
CADISHI's unit) for two random groups of N atoms, 10,000 bins over 0-35 Å,
without a box, in a 100 Å cube and in a triclinic box, in single and double
precision. 35 Å is just below half the smallest width of the triclinic box
(35.4 Å), the usual limit of an RDF; beyond it (``--kernel-rmax 50``) the exact
minimum image of the triclinic box has to try extra lattice images per pair.

Usage::

    python benchmarks/bench_interrdf.py            # full run, InterRDF alone takes minutes
    python benchmarks/bench_interrdf.py --quick    # InterRDF on 2 frames (scaled), N = 30,000

In part A, InterRDF runs once and freud and mdakit_fastrdf ``--repeat`` times
(best time shown); part B runs each case once.

Needs MDAnalysisTests (demo data) and, for the freud column, freud-analysis:
``pip install ".[bench]"``.
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import MDAnalysis as mda
import numpy as np
from _common import cpu_model, usable_cores
from MDAnalysis.analysis.rdf import InterRDF as MDAInterRDF
from MDAnalysis.lib.mdamath import triclinic_vectors
from MDAnalysisTests.datafiles import TPR, XTC

import mdakit_fastrdf
from mdakit_fastrdf import InterRDF, build_info

try:
    import freud
except ImportError:
    freud = None

NBINS, RANGE = 75, (0.0, 15.0)
QUICK_REFERENCE_FRAMES = 2
KERNEL_NBINS = 10_000
KERNEL_BOXES = {
    "no box": None,
    "orthorhombic 100 Å cube": [100.0, 100.0, 100.0, 90.0, 90.0, 90.0],
    "triclinic 100 Å (60°, 60°, 90°)": [100.0, 100.0, 100.0, 60.0, 60.0, 90.0],
}


@dataclass
class Timing:
    """Wall time of one tool and the g(r) it computed."""

    seconds: float
    frames: int
    bins: np.ndarray
    rdf: np.ndarray


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """Format `rows` as a GitHub markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def print_machine(threads: int) -> None:
    print("## Machine\n")
    print(f"- command: `{shlex.join([sys.executable, *sys.argv])}`")
    print(f"- CPU: {cpu_model()}, {usable_cores()} logical CPUs available, "
          f"{threads} threads used")
    print(f"- Python {platform.python_version()}, NumPy {np.__version__}, "
          f"MDAnalysis {mda.__version__}, freud {freud.__version__ if freud else 'n/a'}, "
          f"mdakit_fastrdf {mdakit_fastrdf.__version__}")
    info = ", ".join(
        f"{key}={','.join(value) if isinstance(value, list) else value}"
        for key, value in build_info().items()
    )
    print(f"- build_info: {info}\n")


# -- Part A: the adk water O-O RDF ----------------------------------------------------------


def water_oxygens(universe: mda.Universe) -> mda.AtomGroup:
    return universe.select_atoms("name OW")


def time_mdanalysis(universe: mda.Universe, frames: int) -> Timing:
    ow = water_oxygens(universe)
    rdf = MDAInterRDF(ow, ow, nbins=NBINS, range=RANGE, exclusion_block=(1, 1))
    t0 = time.perf_counter()
    rdf.run(stop=frames)
    return Timing(time.perf_counter() - t0, frames, rdf.results.bins, rdf.results.rdf)


def fastrdf_timer(precision: str, method: str = "auto") -> Callable[[mda.Universe, int, int], Timing]:
    def time_fastrdf(universe: mda.Universe, frames: int, threads: int) -> Timing:
        ow = water_oxygens(universe)
        rdf = InterRDF(ow, ow, nbins=NBINS, range=RANGE, exclusion_block=(1, 1),
                       precision=precision, n_threads=threads, method=method, device="cpu")
        t0 = time.perf_counter()
        rdf.run(stop=frames)
        return Timing(time.perf_counter() - t0, frames, rdf.results.bins, rdf.results.rdf)

    return time_fastrdf


def time_freud(universe: mda.Universe, frames: int, threads: int) -> Timing:
    """freud's RDF, accumulated over frames; each atom's pair with itself is excluded."""
    freud.parallel.set_num_threads(threads)
    ow = water_oxygens(universe)
    rdf = freud.density.RDF(bins=NBINS, r_max=RANGE[1], r_min=RANGE[0])
    t0 = time.perf_counter()
    for ts in universe.trajectory[:frames]:
        # freud's box matrix holds the box vectors as columns, MDAnalysis's as rows.
        box = freud.box.Box.from_matrix(ts.triclinic_dimensions.T)
        rdf.compute(system=(box, box.wrap(ow.positions)), reset=False)
    return Timing(time.perf_counter() - t0, frames, rdf.bin_centers, rdf.rdf)


def part_a(frames: int, threads: int, quick: bool, repeat: int) -> None:
    print("## A. Water O-O RDF of the adenylate kinase demo system\n")
    disk = mda.Universe(TPR, XTC)
    frames = min(frames, len(disk.trajectory))
    ref_frames = min(QUICK_REFERENCE_FRAMES, frames) if quick else frames
    memory = mda.Universe(TPR, XTC)
    memory.transfer_to_memory(stop=frames)
    n_ow = len(water_oxygens(disk))
    print(f"{n_ow} x {n_ow} atoms, {frames} frames, {NBINS} bins over {RANGE[0]:g}-{RANGE[1]:g} Å, "
          f"exclusion_block=(1, 1), {threads} threads for freud and mdakit_fastrdf.")
    if ref_frames < frames:
        print(f"InterRDF runs on {ref_frames} frames; its time is scaled to {frames} frames.")
    print(f"freud and mdakit_fastrdf: best of {repeat} runs. max Δg(r): largest absolute "
          "difference from the g(r) of InterRDF over the same frames.\n")

    tools = {"mdakit_fastrdf single, cell lists (auto)": fastrdf_timer("single"),
             "mdakit_fastrdf single, all pairs": fastrdf_timer("single", "allpairs"),
             "mdakit_fastrdf double, cell lists (auto)": fastrdf_timer("double")}
    if freud is not None:
        tools = {"freud": time_freud, **tools}

    for label, universe in (("trajectory read from disk", disk),
                            ("trajectory preloaded into memory", memory)):
        reference = time_mdanalysis(universe, ref_frames)
        ref_seconds = reference.seconds * frames / ref_frames
        results = {
            name: min((timer(universe, frames, threads) for _ in range(repeat)),
                      key=lambda timing: timing.seconds)
            for name, timer in tools.items()
        }
        freud_seconds = results["freud"].seconds if "freud" in results else None

        rows = [["MDAnalysis InterRDF" + (" (scaled)" if ref_frames < frames else ""),
                 f"{ref_seconds:.2f}", f"{frames / ref_seconds:.3g}", "1.0",
                 f"{freud_seconds / ref_seconds:.3g}" if freud_seconds else "n/a", "0"]]
        if freud is None:
            rows.append(["freud", "n/a", "n/a", "n/a", "n/a", "n/a"])
        for name, timing in results.items():
            if ref_frames < frames:  # compare g(r) over the frames InterRDF ran on
                timing_ref_frames = tools[name](universe, ref_frames, threads)
            else:
                timing_ref_frames = timing
            delta = np.max(np.abs(timing_ref_frames.rdf - reference.rdf))
            rows.append([name, f"{timing.seconds:.3f}", f"{frames / timing.seconds:.3g}",
                         f"{ref_seconds / timing.seconds:.1f}",
                         f"{freud_seconds / timing.seconds:.2f}" if freud_seconds else "n/a",
                         f"{delta:.2g}"])
        print(f"### {label.capitalize()}\n")
        print(markdown_table(["tool", "time (s)", "frames/s", "speed-up vs InterRDF",
                              "speed-up vs freud", "max Δg(r) vs InterRDF"], rows))
        print()


# -- Part B: raw kernel rate -----------------------------------------------------------------


def random_universe(n_atoms: int, seed: int = 2026) -> mda.Universe:
    """One frame of 2 * `n_atoms` atoms uniformly distributed in a 100 Å cube."""
    universe = mda.Universe.empty(2 * n_atoms, trajectory=True)
    rng = np.random.default_rng(seed)
    universe.atoms.positions = rng.uniform(0.0, 100.0, size=(2 * n_atoms, 3)).astype(np.float32)
    return universe


def half_smallest_width(dimensions: list[float]) -> float:
    """Half the smallest distance between opposite faces of a periodic box."""
    vectors = triclinic_vectors(np.asarray(dimensions, dtype=np.float64))
    volume = abs(np.linalg.det(vectors))
    faces = [np.linalg.norm(np.cross(vectors[i], vectors[j])) for i, j in ((0, 1), (1, 2), (2, 0))]
    return 0.5 * volume / max(faces)


def kernel_seconds(universe: mda.Universe, n_atoms: int, rmax: float, precision: str,
                   threads: int) -> float:
    g1, g2 = universe.atoms[:n_atoms], universe.atoms[n_atoms:]
    rdf = InterRDF(g1, g2, nbins=KERNEL_NBINS, range=(0.0, rmax), norm="none",
                   precision=precision, n_threads=threads, method="allpairs", device="cpu")
    t0 = time.perf_counter()
    rdf.run()
    return time.perf_counter() - t0


def part_b(n_atoms: int, rmax: float, threads: int) -> None:
    print("## B. Kernel rate\n")
    pairs = n_atoms * n_atoms
    print(f"{n_atoms} x {n_atoms} random atoms in a 100 Å cube ({pairs:.3g} pairs), one frame, "
          f"{KERNEL_NBINS} bins over 0-{rmax:g} Å, norm='none', {threads} threads; "
          f"bapps = pairs / time / 1e9.")
    for label, dimensions in KERNEL_BOXES.items():
        if dimensions is not None and rmax > half_smallest_width(dimensions):
            print(f"The range exceeds half the smallest width of the {label} box "
                  f"({half_smallest_width(dimensions):.4g} Å): extra lattice images are tried.")
    print()
    universe = random_universe(n_atoms)
    kernel_seconds(random_universe(1000), 1000, rmax, "single", threads)  # warm up
    rows = []
    for label, dimensions in KERNEL_BOXES.items():
        universe.trajectory.ts.dimensions = dimensions
        row = [label]
        for precision in ("single", "double"):
            seconds = kernel_seconds(universe, n_atoms, rmax, precision, threads)
            row += [f"{seconds:.2f}", f"{pairs / seconds / 1e9:.2f}"]
        rows.append(row)
    print(markdown_table(["box", "single: time (s)", "single: bapps",
                          "double: time (s)", "double: bapps"], rows))
    print()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=10,
                        help="frames of the demo trajectory in part A (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="InterRDF on 2 frames (time scaled) and 30,000 atoms in part B")
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="threads of freud and mdakit_fastrdf (default: all available, "
                        "%(default)s)")
    parser.add_argument("--n-atoms", type=int,
                        help="atoms per group in part B (default: 100,000; 30,000 with --quick)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of freud and mdakit_fastrdf in part A, the best is shown "
                        "(default: %(default)s)")
    parser.add_argument("--kernel-rmax", type=float, default=35.0,
                        help="upper end of the range in part B, Å (default: %(default)s)")
    args = parser.parse_args(argv)
    n_atoms = args.n_atoms or (30_000 if args.quick else 100_000)

    print("# mdakit_fastrdf benchmark\n")
    print_machine(args.threads)
    part_a(args.frames, args.threads, args.quick, args.repeat)
    part_b(n_atoms, args.kernel_rmax, args.threads)


if __name__ == "__main__":
    main()
