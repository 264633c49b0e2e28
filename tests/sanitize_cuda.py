"""Runs every CUDA kernel variant once on small problems, for compute-sanitizer.

    compute-sanitizer --tool memcheck --error-exitcode 9 python tests/sanitize_cuda.py
    compute-sanitizer --tool racecheck --error-exitcode 9 python tests/sanitize_cuda.py

Not a pytest module (its name does not start with ``test_``); the GPU tests in
``test_cuda.py`` check the numbers, this script gives the sanitizers every code path: both
kernels, several sweeps, every box type, both precisions, with and without labels. Double
precision runs through the float filter (its queues in shared memory and the settle in
double: ``csrc/cuda/filter.cuh``), also on dense frames and on a frame whose every pair is
flagged. Then the direct k-space sums. It also checks each result against the CPU kernel, so a
run that the sanitizer slows down still proves something.
"""

import os
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, os.path.join(__file__.rsplit("/", 1)[0], "gpu"))  # test_cuda*.py
from conftest import reference_edges  # noqa: E402
from test_cuda import BOXES, histogram, make_problem  # noqa: E402

from mdakit_fastrdf import build_info  # noqa: E402

FAST_RULE = bool(build_info().get("cuda_fast_rule"))


# FASTRDF_SANITIZE_PRECISIONS=double: only the double-precision runs (the float filter's
# kernels), for a short run (default: both precisions)
PRECISIONS = tuple(os.environ.get("FASTRDF_SANITIZE_PRECISIONS", "single,double").split(","))
# FASTRDF_SANITIZE_PARTS=kspace: only the k-space sums (default: histograms,kspace)
PARTS = tuple(os.environ.get("FASTRDF_SANITIZE_PARTS", "histograms,kspace").split(","))


def histogram_cases(rng):
    n_cases = 0
    # periodic all-pairs frames in spatial order: chunks with one image and chunks without
    os.environ["FASTRDF_CUDA_COMMON_IMAGE"] = "always"
    for box_name in BOXES:
        for precision in PRECISIONS:
            for labels in (False, True):
                rmin = 1.5 if labels else 0.0  # both forms of the float rule
                for kernel, max_window, exact in (("shared", 0, True), ("shared", 37, True),
                                                  ("global", 0, True), ("shared", 0, False),
                                                  ("packed", 0, True), ("packed", 37, True)):
                    if not exact and not FAST_RULE:
                        continue  # built without the approximate-root kernels
                    problem = make_problem(rng, box_name, sizes=(150, 170, 61), nbins=100,
                                           labels=labels, rmin=rmin)
                    ref, _ = histogram("cpu", problem, precision)
                    out, eng = histogram("cuda", problem, precision, frames=2, kernel=kernel,
                                         max_window_bins=max_window, exact_sqrt=exact)
                    assert np.array_equal(out, 2 * ref), (
                        box_name, precision, labels, kernel, max_window, exact)
                    n_cases += 1
                # 32-bit windows in blocks of 1024 threads (auto's choice for wide windows)
                os.environ["FASTRDF_CUDA_BLOCK_THREADS"] = "1024"
                try:
                    problem = make_problem(rng, box_name, sizes=(1500, 700, 61), nbins=100,
                                           labels=labels, rmin=rmin)
                    ref, _ = histogram("cpu", problem, precision)
                    out, eng = histogram("cuda", problem, precision, frames=2, kernel="shared")
                finally:
                    del os.environ["FASTRDF_CUDA_BLOCK_THREADS"]
                assert eng.last_launch["threads"] == 1024
                assert np.array_equal(out, 2 * ref), (box_name, precision, labels, "wide")
                n_cases += 1
    # dense frames (every pair within r_max, no box or orthorhombic): full tiles increment
    # without a predicate
    for box_name, rmax, kernel, threads in (("none", 70.0, "shared", "256"),
                                            ("none", 70.0, "shared", "1024"),
                                            ("none", 70.0, "packed", "1024"),
                                            ("ortho", 26.0, "shared", "1024"),
                                            ("ortho", 26.0, "packed", "1024")):
        for precision in PRECISIONS:
            os.environ["FASTRDF_CUDA_BLOCK_THREADS"] = threads
            try:
                problem = make_problem(rng, box_name, sizes=(2100, 600, 61), nbins=100, rmax=rmax)
                ref, _ = histogram("cpu", problem, precision)
                out, eng = histogram("cuda", problem, precision, frames=2, kernel=kernel)
            finally:
                del os.environ["FASTRDF_CUDA_BLOCK_THREADS"]
            assert eng.last_launch["dense"] and eng.last_launch["threads"] == int(threads)
            assert eng.last_launch["kernel"] == kernel
            if precision == "double":
                assert eng.last_launch["rule"] == "filter"
            assert np.array_equal(out, 2 * ref), ("dense", box_name, kernel, threads, precision)
            n_cases += 1
    # double precision, every pair of species 0 with 1 on or next to a bin edge: the filter
    # flags them all (the queues' slow path), dense tiles included
    from test_cuda_filter import _edge_problem  # noqa: E402

    for kernel, method in (("shared", "allpairs"), ("packed", "allpairs"), ("global", "allpairs"),
                           ("auto", "cells")):
        problem, _ = _edge_problem(reference_edges(300, (0.0, 12.0)), 512)
        ref, _ = histogram("cpu", problem, "double")
        out, eng = histogram("cuda", problem, "double", frames=2, kernel=kernel, method=method)
        assert eng.last_launch["rule"] == "filter"
        assert np.array_equal(out, 2 * ref), ("edges", kernel, method)
        n_cases += 1
    # cell lists: shared and global kernels, periodic and not, labels, a flush of the block's
    # histogram (tiny system: forced by the problem's size limits only, so just the paths)
    for box_name in BOXES:
        for precision in PRECISIONS:
            for labels in (False, True):
                for kernel, k, order in (("auto", 1, "rowmajor"), ("global", 2, "hilbert"),
                                         ("auto", 3, "morton")):
                    problem = make_problem(rng, box_name, sizes=(400, 300, 1), nbins=80,
                                           labels=labels, rmax=7.0, rmin=1.5 if labels else 0.0)
                    ref, _ = histogram("cpu", problem, precision, method="allpairs")
                    out, eng = histogram("cuda", problem, precision, frames=2, kernel=kernel,
                                         method="cells", cells_per_cutoff=k, cell_order=order)
                    assert eng.last_launch["method"] == "cells"
                    assert np.array_equal(out, 2 * ref), (box_name, precision, labels, kernel, k)
                    n_cases += 1
    return n_cases


def kspace_cases(rng):
    """The direct k-space sums: several species (one empty), a triclinic box, a frame of few
    atoms (one super-chunk) and one of many (hundreds, so the reduction's lanes each add
    several), and the same plan twice (its super-chunks kept on the device)."""
    n_cases = 0
    from mdakit_fastrdf.engine.kspace import GPU_TOLERANCE, KSpaceEngine, reciprocal_vectors

    box = np.array([[30.0, 0.0, 0.0], [4.0, 28.0, 0.0], [-3.0, 5.0, 26.0]])
    n, _ = reciprocal_vectors(box, 1.6)
    gpu, cpu = KSpaceEngine(device="cuda"), KSpaceEngine(device="cpu")
    for sizes in ((5, 0, 3), (9000, 0, 4321), (9000, 0, 4321)):
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        positions = rng.random((int(offsets[-1]), 3)) @ box * 1.3 - 2.0
        got = gpu.amplitudes(positions, offsets, box, n)
        ref = cpu.amplitudes(positions, offsets, box, n)
        bound = GPU_TOLERANCE * np.sqrt(np.maximum(np.array(sizes, float), 1.0))[:, None]
        assert np.all(np.abs(got - ref) <= bound), sizes
        n_cases += 1
    return n_cases


def main():
    rng = np.random.default_rng(5)
    n_cases = (histogram_cases(rng) if "histograms" in PARTS else 0) + \
        (kspace_cases(rng) if "kspace" in PARTS else 0)
    print(f"sanitize_cuda: {n_cases} kernel runs agree with the CPU kernel")


if __name__ == "__main__":
    main()
