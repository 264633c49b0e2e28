"""Per-frame host time of the analyses: what the Python layer costs around the kernel.

Times ``run()`` over the 10 frames of the adk demo trajectory preloaded in memory (no file
reading), best of ``--repeat``:

* ``adk OW-OW``: InterRDF of the 11,084 water oxygens (75 bins, 15 Å, self pairs
  excluded), kernel-dominated;
* ``tiny``: InterRDF of 64 oxygens, where the kernel takes microseconds and the per-frame
  host work (box, gather, coordinate preparation, engine call) is what is measured;
* ``sites``: InterRDF_s of two pairs of small groups (MDAnalysis's own test case size),
  beside MDAnalysis's InterRDF_s in the same run;
* ``species``: SpeciesRDF by element of the protein and ions.

To compare two checkouts in one run, call it once per tree with ``PYTHONPATH`` set::

    PYTHONPATH=/path/to/old python benchmarks/bench_host.py --label before
    python benchmarks/bench_host.py --label after
"""

from __future__ import annotations

import argparse
import os
import warnings

import MDAnalysis as mda
from _common import best_of, cpu_model
from MDAnalysis.analysis import rdf as mda_rdf
from MDAnalysisTests.datafiles import TPR, XTC

import mdakit_fastrdf
from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--label", default="")
    parser.add_argument("--precision", default="single", choices=("single", "double"),
                        help="of every analysis (default single: the same kernel work in "
                        "checkouts whose default precision differs)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    u = mda.Universe(TPR, XTC, in_memory=True)
    n = len(u.trajectory)
    ow = u.select_atoms("name OW")
    tiny = ow[:64]
    s1, s2 = ow[:3], u.select_atoms("name HW1")[:2]
    s3, s4 = ow[3:5], u.select_atoms("name HW2")[:3]
    prot = u.select_atoms("protein or resname NA+ CL-")
    p = {"precision": args.precision}
    cases = [
        ("adk OW-OW", lambda: InterRDF(ow, ow, exclusion_block=(1, 1), **p).run()),
        ("tiny (64 atoms)", lambda: InterRDF(tiny, tiny, exclusion_block=(1, 1), **p).run()),
        ("sites (2 small pairs)", lambda: InterRDF_s(u, [[s1, s2], [s3, s4]], **p).run()),
        ("  MDAnalysis InterRDF_s", lambda: mda_rdf.InterRDF_s(u, [[s1, s2], [s3, s4]]).run()),
        ("species (protein+ions)", lambda: SpeciesRDF(prot, by="element", **p).run()),
    ]
    print(f"# bench_host {args.label}: mdakit_fastrdf from {mdakit_fastrdf.__file__}")
    print(f"# {cpu_model()}, {n} frames in memory, "
          f"best of {args.repeat}, precision {args.precision}, load {os.getloadavg()[0]:.1f}")
    print(f"| case | ms per frame {args.label} |")
    print("| --- | --- |")
    for name, fn in cases:
        t, _ = best_of(fn, args.repeat, warmup=1)  # warm-up: compiled state, caches
        print(f"| {name} | {1e3 * t / n:.3f} |")


if __name__ == "__main__":
    main()
