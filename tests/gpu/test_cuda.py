"""The CUDA engine: device selection everywhere, and on a GPU bit-for-bit agreement with the
CPU kernel.

Tests marked ``gpu`` skip cleanly without a CUDA build and a usable GPU; the others check, on
any machine, what does not need one (argument checking, device selection, the errors).
"""

import subprocess
import sys

import numpy as np
import pytest

from conftest import (
    GPU_UNAVAILABLE,
    brute_force_counts,
    random_positions_in_box,
    reference_edges,
    requires_gpu,
)
from tables import GPU_LAUNCHES

from mdakit_fastrdf import InterRDF, build_info
from mdakit_fastrdf.engine import (
    NO_BOX,
    ORTHO_SCALED,
    TRICLINIC,
    Box,
    Engine,
    _cuda_module,
    prepare_box,
    validate_device,
)

HAVE_CUDA_BUILD = _cuda_module() is not None


def hopper():
    """GPU 0 is a Hopper (sm_90): the launch shapes `auto` picks by shared memory and
    multiprocessor count are asserted for it; on other GPUs only the counts are checked."""
    from mdakit_fastrdf import cuda_devices

    devices = cuda_devices()
    return bool(devices) and devices[0]["compute_capability"][0] == 9
gpu = [pytest.mark.gpu, requires_gpu]


# ------------------------------------------------------------------------------------------
# problems
# ------------------------------------------------------------------------------------------

BOXES = {
    "none": None,
    "ortho": np.array([31.0, 27.5, 29.0, 90, 90, 90]),
    "ortho_scaled": np.array([31.0, 27.5, 29.0, 90, 90, 90]),
    "triclinic": np.array([30.0, 32.0, 29.0, 70, 80, 65]),
    "triclinic_multi": np.array([30.0, 32.0, 29.0, 60, 60, 90]),
}


def make_problem(rng, box_name, sizes=(700, 1300, 513), pairs=((0, 0), (0, 1), (1, 2), (2, 2), (2, 0)),
                 nbins=300, labels=False, rmax=None, rmin=0.0):
    dims = BOXES[box_name]
    n = int(sum(sizes))
    if dims is None:
        coords = (rng.random((n, 3)) * 40.0 - 5.0).astype(np.float32)
        box = Box(NO_BOX)
        rmax = rmax or 45.0
    else:
        coords = random_positions_in_box(rng, n, dims)[0]
        box = prepare_box(dims)
        if box_name == "ortho_scaled":
            box = Box(ORTHO_SCALED, box.vectors32)
        # multi: beyond half the smallest width, so extra images are needed
        rmax = rmax or (24.0 if box_name == "triclinic_multi" else 12.0)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pairs = np.array(pairs, dtype=np.int32).reshape(-1, 2)
    edges = reference_edges(nbins, (rmin, rmax))
    lab = rng.integers(0, n // 4, n).astype(np.int32) if labels else None
    return coords, offsets, pairs, edges, box, lab


def histogram(device, problem, precision="single", frames=1, **engine_kw):
    coords, offsets, pairs, edges, box, labels = problem
    out = np.zeros((len(pairs), len(edges) - 1), dtype=np.uint64)
    eng = Engine(device, precision, **engine_kw)
    for _ in range(frames):
        eng.accumulate(coords, offsets, pairs, edges, box, labels, out)
    eng.synchronize()
    return out, eng


# ------------------------------------------------------------------------------------------
# everywhere: argument checking and device selection
# ------------------------------------------------------------------------------------------


def test_validate_device_forms():
    assert validate_device("cpu") == "cpu"
    assert validate_device("AUTO") == "auto"
    with pytest.raises(TypeError, match="device"):
        validate_device(0)
    with pytest.raises(ValueError, match="device"):
        validate_device("gpu")
    with pytest.raises(ValueError, match="cuda:N"):
        validate_device("cuda:first")
    if HAVE_CUDA_BUILD:
        assert validate_device("cuda") == "cuda:0"
        assert validate_device("CUDA:1") == "cuda:1"
    else:
        with pytest.raises(ValueError, match="no CUDA kernels"):
            validate_device("cuda")


def test_engine_kernel_option_checked():
    with pytest.raises(ValueError, match="kernel"):
        Engine("cpu", kernel="texture")


def test_build_info_reports_cuda():
    info = build_info()
    assert info["cuda"] is HAVE_CUDA_BUILD
    if HAVE_CUDA_BUILD:
        archs = info["cuda_architectures"]
        assert archs and all(a.split("-")[0].isdigit() for a in archs)


def test_exact_sqrt_false_needs_the_fast_rule_build():
    """The approximate-root kernels are built only on request (FASTRDF_CUDA_FAST_RULE=ON):
    without them exact_sqrt=False is refused at once, naming the option."""
    if not HAVE_CUDA_BUILD or build_info()["cuda_fast_rule"]:
        pytest.skip("needs a CUDA build without the approximate-root kernels")
    with pytest.raises(ValueError, match="FASTRDF_CUDA_FAST_RULE=ON"):
        Engine("cuda", exact_sqrt=False)
    Engine("cuda", exact_sqrt=True)  # the default stays available


@pytest.mark.slow  # a new interpreter
def test_cli_info_has_cuda_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mdakit_fastrdf", "--info"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("cuda_devices")]
    assert len(line) == 1
    if GPU_UNAVAILABLE is None:
        assert "cuda:0" in line[0]
    else:
        assert "none:" in line[0]


def test_auto_uses_cpu_for_small_frames(rng):
    problem = make_problem(rng, "ortho", sizes=(50, 60), pairs=((0, 1),))
    out, eng = histogram("auto", problem)
    assert eng.device_used == "cpu"
    ref, _ = histogram("cpu", problem)
    assert np.array_equal(out, ref)


@pytest.mark.skipif(GPU_UNAVAILABLE is None, reason="a GPU is usable here")
def test_auto_without_gpu_falls_back_to_cpu(rng):
    problem = make_problem(rng, "none", sizes=(1500,), pairs=((0, 0),), rmax=80.0)  # > 1e6 pairs
    out, eng = histogram("auto", problem)
    assert eng.device_used == "cpu"
    assert out.sum() == 1500 * 1500


@pytest.mark.skipif(GPU_UNAVAILABLE is None or not HAVE_CUDA_BUILD,
                    reason="needs a CUDA build on a machine without a usable GPU")
def test_cuda_without_gpu_is_a_clear_error(rng, small_periodic_universe):
    problem = make_problem(rng, "ortho", sizes=(20, 30), pairs=((0, 1),))
    with pytest.raises(RuntimeError, match="no usable CUDA device"):
        histogram("cuda", problem)
    ag = small_periodic_universe.atoms
    with pytest.raises(RuntimeError, match=r"device='cuda:0' was asked for"):
        InterRDF(ag, ag, device="cuda").run()


# ------------------------------------------------------------------------------------------
# on a GPU: bit for bit with the CPU kernel
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("box_name", list(BOXES))
@pytest.mark.gpu
@requires_gpu
def test_gpu_matches_cpu(rng, box_name, precision, labels):
    problem = make_problem(rng, box_name, labels=labels)
    if box_name == "triclinic_multi":
        # the problem really needs extra images
        from mdakit_fastrdf.engine._fastrdf_cpu import triclinic_setup

        assert len(triclinic_setup(problem[4].vectors, problem[3][-1])["images"]) > 0
    ref, _ = histogram("cpu", problem, precision)
    out, eng = histogram("cuda", problem, precision)
    assert eng.device_used == "cuda:0"
    assert eng.last_launch["kernel"] == "shared"
    # double precision: through the float filter (test_cuda_filter.py)
    assert eng.last_launch["rule"] == ("filter" if precision == "double" else "exact")
    assert out.sum() > 0
    np.testing.assert_array_equal(out, ref)


@pytest.mark.gpu
@requires_gpu
def test_gpu_double_matches_float64_brute_force(rng):
    problem = make_problem(rng, "triclinic", sizes=(400, 500), pairs=((0, 0), (0, 1)), nbins=150)
    coords, offsets, pairs, edges, box, _ = problem
    out, _ = histogram("cuda", problem, "double")
    a, b = coords[:400], coords[400:]
    dims = BOXES["triclinic"]
    same = brute_force_counts(a, a, dims, edges, same=True, mdanalysis_path=False)
    same[0] += len(a)  # each atom with itself at distance 0, as InterRDF counts g1 == g2
    np.testing.assert_array_equal(out[0], same)
    np.testing.assert_array_equal(out[1], brute_force_counts(a, b, dims, edges,
                                                             mdanalysis_path=False))


@pytest.mark.parametrize(
    "kernel,nbins,max_window,expect",
    [
        ("shared", 1000, 97, ("shared", 11)),      # many sweeps over narrow windows
        ("shared", 5, 0, ("shared", 1)),           # few bins: many sub-histograms
        ("global", 1000, 0, ("global", 1)),
        ("auto", 10_000, 0, ("shared", 1)),        # five 32-bit blocks of 256 threads per SM
        ("auto", 20_000, 0, ("shared", 1)),        # two per SM only: blocks of 1024 threads
        ("auto", 40_000, 0, ("shared", 1)),        # one per SM: blocks of 1024 threads
        ("auto", 100_000, 0, ("packed", "any")),   # wider: packed (one sweep on Hopper)
        ("auto", 400_000, 0, ("packed", "many")),  # ... in sweeps
        ("auto", 500_000, 0, ("global", 1)),       # much wider: 64-bit global atomics
        ("shared", 200_000, 0, ("shared", "many")),  # ... forced through 32-bit sweeps
        ("packed", 1000, 0, ("packed", 1)),
        ("packed", 1000, 97, ("packed", 11)),      # odd windows: the last word half empty
        ("packed", 5, 0, ("packed", 1)),
        ("packed", 1, 0, ("packed", 1)),
    ],
)
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_kernels_and_sweeps(rng, kernel, nbins, max_window, expect, precision):
    problem = make_problem(rng, "ortho", sizes=(900, 1100), pairs=((0, 0), (0, 1), (1, 1)),
                           nbins=nbins, labels=True)
    ref, _ = histogram("cpu", problem, precision)
    out, eng = histogram("cuda", problem, precision, kernel=kernel, max_window_bins=max_window)
    np.testing.assert_array_equal(out, ref)
    launch = eng.last_launch
    if kernel == "auto" and not hopper():
        return  # auto's shapes below are those of Hopper's shared memory (228 kB per SM)
    if precision == "double" and nbins == 400_000:
        # double precision keeps room for the float filter's queues (16 kB per 1024-thread
        # block), so 400k bins would take 5 packed sweeps: 64-bit global atomics instead
        expect = ("global", 1)
    assert launch["kernel"] == expect[0]
    if kernel == "auto" and launch["kernel"] == "shared":
        assert launch["threads"] == (256 if nbins <= 10_000 else 1024)
    if expect[1] == "many":
        assert launch["sweeps"] > 1
    elif expect[1] != "any":
        assert launch["sweeps"] == expect[1]


@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("box_name", list(BOXES))
@pytest.mark.parametrize("max_window", [0, 999])
@pytest.mark.gpu
@requires_gpu
def test_gpu_packed_matches_cpu(rng, box_name, precision, labels, max_window):
    """The packed kernel (two 16-bit counters per shared word), in one sweep and in odd-sized
    windows, on every box: the CPU kernel's histogram bit for bit."""
    problem = make_problem(rng, box_name, nbins=3001, labels=labels)
    ref, _ = histogram("cpu", problem, precision)
    out, eng = histogram("cuda", problem, precision, frames=2, kernel="packed",
                         max_window_bins=max_window)
    assert eng.last_launch["kernel"] == "packed"
    assert eng.last_launch["sweeps"] == (1 if max_window == 0 else 4)
    assert out.sum() > 0
    np.testing.assert_array_equal(out, 2 * ref)


@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("box_name", list(BOXES))
@pytest.mark.parametrize("threads", ["256", "1024"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_block_threads_match_cpu(rng, monkeypatch, box_name, precision, labels, threads):
    """32-bit shared windows in blocks of 256 or of 1024 threads (forced through
    FASTRDF_CUDA_BLOCK_THREADS; auto takes 1024 for windows that leave room for one block per
    multiprocessor): the CPU kernel's histogram bit for bit, on every box, with the triangle
    and label exclusions."""
    monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", threads)
    problem = make_problem(rng, box_name, nbins=3001, labels=labels)
    ref, _ = histogram("cpu", problem, precision)
    out, eng = histogram("cuda", problem, precision, frames=2, kernel="shared")
    assert eng.last_launch["kernel"] == "shared"
    assert eng.last_launch["threads"] == int(threads)
    assert eng.last_launch["sweeps"] == 1
    assert out.sum() > 0
    np.testing.assert_array_equal(out, 2 * ref)


@pytest.mark.gpu
@requires_gpu
def test_gpu_large_problem_takes_wide_blocks(rng, monkeypatch):
    """auto: a problem with pairs enough for many 2048 x 2048 tiles per multiprocessor runs in
    one block of 1024 threads per multiprocessor, its shared memory filled with
    sub-histograms; every one of its 4.9e9 pairs is counted once (all in range)."""
    n = 70_000
    coords = (rng.random((2 * n, 3)) * 50.0).astype(np.float32)
    offsets = np.array([0, n, 2 * n], np.int64)
    pairs = np.array([[0, 1]], np.int32)
    edges = reference_edges(10_000, (0.0, 100.0))
    out = np.zeros((1, 10_000), np.uint64)
    eng = Engine("cuda", "single")
    eng.accumulate(coords, offsets, pairs, edges, Box(NO_BOX), None, out)
    eng.synchronize()
    assert int(out.sum()) == n * n
    launch = eng.last_launch
    if hopper():  # (132 multiprocessors: 4.9e9 pairs are more than 8 large tiles each)
        assert (launch["kernel"], launch["threads"], launch["sweeps"]) == ("shared", 1024, 1)
        assert launch["copies"] > 1
    # the same frame in blocks of 256 threads (a smaller problem's shape): the same counts
    monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", "256")
    narrow = np.zeros_like(out)
    eng256 = Engine("cuda", "single")
    eng256.accumulate(coords, offsets, pairs, edges, Box(NO_BOX), None, narrow)
    eng256.synchronize()
    assert eng256.last_launch["threads"] == 256
    np.testing.assert_array_equal(out, narrow)


@pytest.mark.gpu
@requires_gpu
def test_gpu_block_threads_bad_value(rng, monkeypatch):
    monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", "512")
    with pytest.raises(ValueError, match="FASTRDF_CUDA_BLOCK_THREADS"):
        histogram("cuda", make_problem(rng, "ortho", nbins=100), "single")


@pytest.mark.parametrize("rmax", [2.0, 0.7], ids=["bin-1", "at-rmax"])
@pytest.mark.parametrize("kernel", ["packed", "shared"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_packed_counters_overflow(kernel, rmax):
    """Millions of pairs into the two halves of one packed word at once. Species 0 (6000
    atoms) and species 1 (2000 atoms) alternate between two points 0.7 A apart, so every
    block counts pairs into bin 0 (the low half of word 0) and bin 1 (its high half) at the
    same time, with 1024 threads hammering those two counters (a block of 2048 x 2048 pairs
    puts about a million into each, so each passes 0x8000 some thirty times per block). The
    counts must be exact. With r_max = 0.7 A the pairs across the two points lie exactly at
    r_max, whose float bin coordinate is 4.0: they go to the counter beyond the last bin
    (packed: the low half of word 2), which the flushes add to bin 3."""
    na, nb = 6000, 2000
    coords = np.zeros((na + nb, 3), np.float32)
    coords[1:na:2, 0] = 0.7
    coords[na + 1::2, 0] = 0.7
    offsets = np.array([0, na, na + nb], np.int64)
    pairs = np.array([[0, 0], [0, 1]], np.int32)
    edges = reference_edges(4, (0.0, rmax))
    across = 1 if rmax == 2.0 else 3
    if rmax == 0.7:  # the float bin coordinate of r_max reaches nbins: the extra counter
        norm = np.float32(4 / (edges[-1] - edges[0]))
        assert np.float32(np.float32(edges[-1]) * norm) == np.float32(4.0)
    out = np.zeros((2, 4), np.uint64)
    eng = Engine("cuda", kernel=kernel)
    for _ in range(3):
        eng.accumulate(coords, offsets, pairs, edges, Box(NO_BOX), None, out)
    eng.synchronize()
    assert eng.last_launch["kernel"] == kernel
    expect = np.zeros((2, 4), np.uint64)
    ha, hb = na // 2, nb // 2
    expect[0, 0] = 3 * 2 * ha * ha  # ordered pairs in the same spot, each atom with itself
    expect[0, across] = 3 * 2 * ha * ha  # ordered pairs across the two spots
    expect[1, 0] = 3 * 2 * ha * hb
    expect[1, across] = 3 * 2 * ha * hb
    np.testing.assert_array_equal(out, expect)


@pytest.mark.gpu
@requires_gpu
def test_gpu_trajectory_and_out_switch(rng):
    """Frames queue asynchronously; counts land in the out array they were meant for."""
    n = 3000
    cpu = Engine("cpu")
    gpu_engine = Engine("cuda")
    offsets = np.array([0, 1000, n], dtype=np.int64)
    pairs = np.array([[0, 0], [0, 1]], dtype=np.int32)
    edges = reference_edges(200, (0.0, 14.0))
    outs = [np.zeros((2, 200), np.uint64) for _ in range(4)]
    for f in range(6):
        dims = np.array([30.0 + f, 31.0, 29.0 - 0.5 * f, 75 + f, 85, 70])
        coords = random_positions_in_box(rng, n, dims)[0]
        box = prepare_box(dims)
        assert box.kind == TRICLINIC
        k = f // 3  # frames 0-2 into one array, 3-5 into the next
        cpu.accumulate(coords, offsets, pairs, edges, box, None, outs[k])
        gpu_engine.accumulate(coords, offsets, pairs, edges, box, None, outs[2 + k])
    gpu_engine.synchronize()
    np.testing.assert_array_equal(outs[2], outs[0])
    np.testing.assert_array_equal(outs[3], outs[1])


@pytest.mark.gpu
@requires_gpu
def test_gpu_counts_beyond_uint32(rng):
    """70 000 atoms at one point: 4.9e9 ordered pairs in one bin, more than 2^32."""
    n = 70_000
    coords = np.zeros((n, 3), np.float32)
    offsets = np.array([0, n], np.int64)
    pairs = np.array([[0, 0]], np.int32)
    edges = reference_edges(4, (0.0, 1.0))
    out = np.zeros((1, 4), np.uint64)
    eng = Engine("cuda")
    eng.accumulate(coords, offsets, pairs, edges, Box(NO_BOX), None, out)
    eng.synchronize()
    assert out[0, 0] == np.uint64(n) * np.uint64(n) and out[0, 1:].sum() == 0


@pytest.mark.gpu
@requires_gpu
def test_gpu_missing_device_index(rng):
    problem = make_problem(rng, "ortho", sizes=(20, 30), pairs=((0, 1),))
    with pytest.raises(ValueError, match="no CUDA device 99"):
        histogram("cuda:99", problem)


@pytest.mark.gpu
@requires_gpu
def test_gpu_out_of_memory_is_a_python_error(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot see the GPU")
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(int(free - (256 << 20)), dtype=torch.uint8, device="cuda")
    try:
        problem = make_problem(rng, "ortho", sizes=(100, 100), pairs=((0, 1),) * 64, nbins=600_000)
        with pytest.raises(MemoryError, match="out of memory"):
            histogram("cuda", problem)
    finally:
        del hog
        torch.cuda.empty_cache()


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("precision", ["single", "double"])
def test_gpu_interrdf_matches_cpu_on_adk(adk_water, precision):
    ow = adk_water.select_atoms("name OW")
    kw = dict(nbins=200, range=(0.0, 12.0), exclusion_block=(1, 1), precision=precision)
    cpu = InterRDF(ow, ow, device="cpu", **kw).run()
    gpu_run = InterRDF(ow, ow, device="cuda", **kw).run()
    np.testing.assert_array_equal(gpu_run.results.count_uint64, cpu.results.count_uint64)
    np.testing.assert_array_equal(gpu_run.results.rdf, cpu.results.rdf)


@pytest.mark.gpu
@requires_gpu
def test_gpu_workers_through_dask(adk_water):
    pytest.importorskip("dask")
    ow = adk_water.select_atoms("name OW")
    serial = InterRDF(ow, ow, device="cpu").run(stop=4)
    par = InterRDF(ow, ow, device="cuda").run(stop=4, backend="dask", n_workers=2)
    np.testing.assert_array_equal(par.results.count_uint64, serial.results.count_uint64)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=gpu)])
def test_coordinates_far_outside_the_box_are_rejected(rng, device):
    """The minimum-image rounding is exact within 2^20 box widths; beyond, a clear error."""
    coords, offsets, pairs, edges, box, labels = make_problem(rng, "ortho", sizes=(20, 30),
                                                              pairs=((0, 1),))
    coords = coords.copy()
    coords[3, 1] = 27.5 * 2.0**21
    with pytest.raises(ValueError, match="2\\^20 box widths"):
        histogram(device, (coords, offsets, pairs, edges, box, labels))


@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("launch", ["256", "1024", "packed"])
@pytest.mark.parametrize("rmax,dense", [(70.0, True), (60.0, False)], ids=["dense", "not-dense"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_frames_with_every_pair_in_range(rng, monkeypatch, rmax, dense, launch, labels):
    """No box and r_max beyond the frame's diagonal (positions in a 40 Å cube: 69.3 Å): the
    host proves every pair in range and full tiles off the diagonal take the dense path (no
    range test, no predicate); diagonal tasks, partial tiles and labels keep the masked one.
    Bit for bit with the CPU in both block sizes of the 32-bit kernel and in the packed one;
    at r_max 60 Å some pairs are out."""
    kernel = "packed" if launch == "packed" else "shared"
    if launch != "packed":
        monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", launch)
    problem = make_problem(rng, "none", sizes=(5000, 2100, 700),
                           pairs=((0, 0), (0, 1), (1, 1), (1, 2), (2, 0)), rmax=rmax,
                           labels=labels)
    ref, _ = histogram("cpu", problem)
    out, eng = histogram("cuda", problem, kernel=kernel)
    assert eng.last_launch["dense"] is (dense and not labels)  # labels: never dense
    assert eng.last_launch["kernel"] == kernel
    assert eng.last_launch["threads"] == (1024 if launch == "packed" else int(launch))
    np.testing.assert_array_equal(out, ref)
    n = np.array([5000, 2100, 700])
    expected = n[0] * n[0] + n[0] * n[1] + n[1] * n[1] + n[1] * n[2] + n[2] * n[0]
    if not labels:  # every ordered pair, self pairs included, when every pair is in range
        assert (int(out.sum()) == int(expected)) == dense


@pytest.mark.gpu
@requires_gpu
def test_gpu_dense_bound_keeps_its_margin(monkeypatch):
    """The dense test must allow for rounding: here the frame's exact extent gives
    ex² + ey² + ez² within hi2 (the largest float r² with sqrt(r²) <= r_max), yet the corner
    pair's float r² rounds past hi2, so the CPU leaves it out. A frame like this is not
    dense; without the host's margin it would be, and the full tiles of species 0 would
    count the corner pairs."""
    monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", "256")
    f32 = np.float32
    rmax = f32(10.0)
    hi2 = f32(rmax * rmax)
    while np.sqrt(np.nextafter(hi2, f32(np.inf))) <= rmax:
        hi2 = np.nextafter(hi2, f32(np.inf))
    while np.sqrt(hi2) > rmax:
        hi2 = np.nextafter(hi2, f32(0))
    corner = np.array([6.1274333, 7.179447, 3.303045], f32)
    exact = sum(float(c) ** 2 for c in corner)
    r2 = f32(f32(f32(corner[0] * corner[0]) + f32(corner[1] * corner[1])) + f32(corner[2] * corner[2]))
    assert exact <= float(hi2) < float(r2)  # the frame this test needs
    coords = np.zeros((1025, 3), f32)  # species 0: 1024 atoms at the origin (full tiles)
    coords[-1] = corner                # species 1: one atom at the far corner
    problem = (coords, np.array([0, 1024, 1025], np.int64), np.array([[0, 1]], np.int32),
               reference_edges(50, (0.0, 10.0)), Box(NO_BOX), None)
    ref, _ = histogram("cpu", problem)
    out, eng = histogram("cuda", problem)
    assert ref.sum() == 0  # every pair is beyond r_max in float
    assert eng.last_launch["dense"] is False
    np.testing.assert_array_equal(out, ref)


EDGE_LAUNCHES = GPU_LAUNCHES


@pytest.mark.parametrize("launch", list(EDGE_LAUNCHES))
@pytest.mark.parametrize("rmin", [0.0, 0.5], ids=["from-0", "from-0.5"])
@pytest.mark.parametrize("nbins", [7, 300])
@pytest.mark.gpu
@requires_gpu
def test_gpu_pairs_on_bin_edges(rng, monkeypatch, nbins, rmin, launch):
    """Pairs placed exactly on the float32 bin edges (r_max included: numpy's last bin is
    closed) and one float step either side, in every launch shape: the default single-precision
    rule bins them as the CPU kernel does. A range from 0 takes the rule without the lower
    range test and the subtraction of r_min, and the shared kernels count r == r_max in a
    slot of its own that is added to the last bin at the flush."""
    edges = reference_edges(nbins, (rmin, 20.0))
    e32 = edges.astype(np.float32)
    xs = np.concatenate([e32, np.nextafter(e32, np.float32(0)), np.nextafter(e32, np.float32(99)),
                         np.full(40, e32[-1])])  # many pairs at r_max, in several warps
    xs = rng.permutation(xs)
    coords = np.zeros((1 + len(xs), 3), np.float32)
    coords[1:, 0] = xs
    offsets = np.array([0, 1, len(coords)], np.int64)
    pairs = np.array([[0, 1], [1, 1]], np.int32)
    problem = (coords, offsets, pairs, edges, Box(NO_BOX), None)
    ref, _ = histogram("cpu", problem)
    kw = dict(EDGE_LAUNCHES[launch])
    if kw.get("max_window_bins") == "third":  # three or four windows
        kw["max_window_bins"] = max(2, nbins // 3)
    if "threads" in kw:
        monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", kw.pop("threads"))
    out, eng = histogram("cuda", problem, **kw)
    assert ref[0, -1] >= 41  # the r_max pairs are there to be counted
    np.testing.assert_array_equal(out, ref)
    assert eng.last_launch["method"] == ("cells" if launch == "cells" else "allpairs")
    if "sweeps" in launch:
        assert eng.last_launch["sweeps"] >= 3
    if launch == "threads-1024":
        assert eng.last_launch["threads"] == 1024


@pytest.mark.parametrize("nbins", [7, 300, 20_000])
@pytest.mark.gpu
@requires_gpu
def test_gpu_fast_rule_on_bin_edges(rng, nbins):
    """Pairs placed exactly on (float32) bin edges and one float step either side: the fast
    rule (approximate root, threshold correction) bins them as the IEEE root does."""
    if not build_info().get("cuda_fast_rule"):
        pytest.skip("built without the approximate-root kernels (FASTRDF_CUDA_FAST_RULE=OFF)")
    edges = reference_edges(nbins, (0.5, 20.0))
    e32 = edges.astype(np.float32)
    xs = np.concatenate([e32, np.nextafter(e32, np.float32(0)), np.nextafter(e32, np.float32(99))])
    xs = rng.permutation(xs)
    coords = np.zeros((1 + len(xs), 3), np.float32)
    coords[1:, 0] = xs
    coords[1:, 1] = rng.choice([0.0, 1e-3], len(xs)).astype(np.float32)
    offsets = np.array([0, 1, len(coords)], np.int64)
    pairs = np.array([[0, 1], [1, 1]], np.int32)
    problem = (coords, offsets, pairs, edges, Box(NO_BOX), None)
    ref, _ = histogram("cpu", problem)
    fast, eng = histogram("cuda", problem, exact_sqrt=False)
    exact, eng_exact = histogram("cuda", problem, exact_sqrt=True)
    assert eng.last_launch["rule"] == "fast" and eng_exact.last_launch["rule"] == "exact"
    np.testing.assert_array_equal(exact, ref)
    np.testing.assert_array_equal(fast, ref)


# ------------------------------------------------------------------------------------------
# one image per chunk of j atoms (periodic boxes)
# ------------------------------------------------------------------------------------------


def unwrapped(rng, coords, box_name, fraction=0.3):
    """Moves a fraction of the atoms by random lattice vectors (up to two cells each way), as
    an unwrapped trajectory has them: displacements then need shifts of several cells."""
    dims = BOXES[box_name]
    from conftest import box_matrix

    b = box_matrix(dims).astype(np.float32)
    out = coords.copy()
    moved = rng.random(len(out)) < fraction
    shifts = rng.integers(-2, 3, (int(moved.sum()), 3)).astype(np.float32)
    out[moved] = (out[moved] + shifts @ b).astype(np.float32)
    return out


@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("mode", ["always", "off"])
@pytest.mark.parametrize("box_name", ["ortho", "ortho_scaled", "triclinic", "triclinic_multi"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_one_image_per_chunk_matches_cpu(rng, monkeypatch, box_name, mode, precision, labels):
    """FASTRDF_CUDA_COMMON_IMAGE=always sorts the frame spatially and lets a warp take one
    image for a chunk of 32 j atoms when the extreme corners of the chunk's bounding box
    get the same image indices for every row (common_image), or, triclinic, when the rows
    disagree on one index only (each pair then takes that index alone); 'off' does neither.
    Both give the CPU kernel's histogram bit for bit, with a third of the atoms moved by up
    to two cells (unwrapped), so that shifts other than 0 and chunks needing several images
    occur; the statistics show that every kind of chunk ran."""
    monkeypatch.setenv("FASTRDF_CUDA_COMMON_IMAGE", mode)
    coords, offsets, pairs, edges, box, lab = make_problem(
        rng, box_name, sizes=(3000, 2100, 700), pairs=((0, 0), (0, 1), (1, 2), (2, 2)),
        labels=labels)
    problem = (unwrapped(rng, coords, box_name), offsets, pairs, edges, box, lab)
    ref, _ = histogram("cpu", problem, precision)
    out, eng = histogram("cuda", problem, precision, method="allpairs")
    np.testing.assert_array_equal(out, ref)
    assert out.sum() > 0
    common, one_index, total = eng.last_launch["image_chunks"]
    assert eng.last_launch["sorted"] is (mode == "always")
    if mode == "always":
        assert 0 < common < total, (common, total)
        # (chunks whose rows disagree on one index only: triclinic and orthorhombic, not the
        # MDAnalysis-scaled form, single precision; with unwrapped atoms they are rare,
        # test_gpu_one_index_per_chunk has them in number)
        assert one_index + common < total, (one_index, common, total)
        # (double precision through the float filter runs the float kernels: the same chunks)
        if box_name == "ortho_scaled" or (precision == "double" and eng.last_launch["rule"] != "filter"):
            assert one_index == 0
    else:
        assert common == 0 and one_index == 0 and total > 0


@pytest.mark.parametrize("labels", [False, True], ids=["all", "labels"])
@pytest.mark.parametrize("box_name", ["ortho", "triclinic", "triclinic_multi"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_one_index_per_chunk(rng, monkeypatch, box_name, labels):
    """Single precision: a chunk where the rows disagree on one image index only takes that
    index per pair (triclinic: picks between the row's two positions of atom i; orthorhombic:
    that axis takes each pair's own shift, the other two the row's). With wrapped atoms,
    sorted, most chunks that cannot take one image take one index; bit for bit with the CPU
    kernel, with and without extra images."""
    monkeypatch.setenv("FASTRDF_CUDA_COMMON_IMAGE", "always")
    problem = make_problem(rng, box_name, sizes=(9000, 4000), pairs=((0, 0), (0, 1), (1, 1)),
                           labels=labels)
    ref, _ = histogram("cpu", problem)
    out, eng = histogram("cuda", problem, method="allpairs")
    np.testing.assert_array_equal(out, ref)
    common, one_index, total = eng.last_launch["image_chunks"]
    assert 0 < common and 0 < one_index and common + one_index < total, (common, one_index, total)


@pytest.mark.parametrize("box_name", ["ortho", "triclinic"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_one_image_on_half_box_ties(monkeypatch, box_name):
    """Displacements of exactly half a box length (d / L = 0.5: nint's tie, which rounds to
    even) and one float step either side, on a lattice whose chunks end exactly there: the
    chunks that take one image and those that do not agree with the CPU bit for bit."""
    monkeypatch.setenv("FASTRDF_CUDA_COMMON_IMAGE", "always")
    f32 = np.float32
    if box_name == "ortho":
        dims = np.array([32.0, 16.0, 8.0, 90, 90, 90])
    else:
        dims = np.array([32.0, 16.0, 16.0, 90, 90, 60])
    from conftest import box_matrix

    b = box_matrix(dims).astype(np.float64)
    g = np.stack(np.meshgrid(np.arange(64), np.arange(8), np.arange(4), indexing="ij"), -1)
    frac = g.reshape(-1, 3) / np.array([64.0, 8.0, 4.0])
    lat = (frac @ b).astype(f32)  # a 0.5 Å lattice along x: pairs at exactly 16 Å
    nudged = lat.copy()
    nudged[::3, 0] = np.nextafter(nudged[::3, 0], f32(99))
    nudged[1::3, 0] = np.nextafter(nudged[1::3, 0], f32(-99))
    coords = np.concatenate([lat, nudged]).astype(f32)
    n = len(lat)
    offsets = np.array([0, n, 2 * n], np.int64)
    pairs = np.array([[0, 0], [0, 1], [1, 1]], np.int32)
    problem = (coords, offsets, pairs, reference_edges(400, (0.0, 18.0)), prepare_box(dims), None)
    ref, _ = histogram("cpu", problem)
    out, eng = histogram("cuda", problem, method="allpairs")
    np.testing.assert_array_equal(out, ref)
    common, _, total = eng.last_launch["image_chunks"]
    assert 0 < common < total, (common, total)


@pytest.mark.parametrize("rmax,dense", [(26.0, True), (25.0, False)], ids=["dense", "not-dense"])
@pytest.mark.gpu
@requires_gpu
def test_gpu_orthorhombic_frames_with_every_image_in_range(rng, monkeypatch, rmax, dense):
    """Orthorhombic box with r_max beyond half its diagonal (25.3 Å here): every minimum-image
    pair is in range, the host proves it (with margins for rounding) and full tiles skip the
    range test; at 25 Å they do not. Bit for bit with the CPU either way, unwrapped atoms
    included (the bound allows for the coordinates' extent)."""
    monkeypatch.setenv("FASTRDF_CUDA_BLOCK_THREADS", "256")
    dims = np.array([31.0, 27.5, 29.0, 90, 90, 90])
    coords = random_positions_in_box(rng, 4000, dims)[0]
    coords[::7] += np.float32(31.0)  # one cell over along x
    n = np.array([2600, 1400])
    problem = (coords, np.array([0, n[0], 4000], np.int64),
               np.array([[0, 0], [0, 1], [1, 1]], np.int32), reference_edges(500, (0.0, rmax)),
               prepare_box(dims), None)
    assert np.sqrt((dims[:3] ** 2).sum()) / 2 < 26.0
    ref, _ = histogram("cpu", problem)
    out, eng = histogram("cuda", problem, method="allpairs")
    assert eng.last_launch["dense"] is dense
    np.testing.assert_array_equal(out, ref)
    expected = n[0] * n[0] + n[0] * n[1] + n[1] * n[1]
    assert (int(out.sum()) == int(expected)) == dense


@pytest.mark.gpu
@requires_gpu
def test_gpu_common_image_bad_value(rng, monkeypatch):
    monkeypatch.setenv("FASTRDF_CUDA_COMMON_IMAGE", "sometimes")
    with pytest.raises(ValueError, match="FASTRDF_CUDA_COMMON_IMAGE"):
        histogram("cuda", make_problem(rng, "ortho"))
