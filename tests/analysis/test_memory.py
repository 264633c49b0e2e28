"""Peak memory of a 1,000,000-atom frame: histograms and a few copies of the coordinates.

The package never materialises per-pair arrays (MDAnalysis's ``capped_distance`` returns
every pair within r_max: for this system ~5e7 pairs, i.e. ~0.4 GB of indices alone plus
distances). A child process builds a 1M-atom periodic system, resets its peak RSS
(``/proc/self/clear_refs``), runs InterRDF (cell lists, the default for such a frame),
SpeciesRDF (3 species, 6 pair histograms) and InterRDF with the all-pairs kernel (20,000 atoms
against the million) and reports the growth of the peak RSS. It must stay
below the histograms plus 8 copies of one frame's coordinates (12 MB each) -- the frame
buffer, the kernel's structure-of-arrays copy, the cell grid's sorted copy and cell indices --
plus 16 MB of slack for the Python allocator.

The measured figures are printed (``pytest -s``) for the benchmark notes.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mdakit_fastrdf.engine._fastrdf_cpu")

CHILD = textwrap.dedent(
    r"""
    import json, os, sys
    import numpy as np
    sys.path[:0] = json.loads(sys.argv[1])
    from conftest import make_universe
    from mdakit_fastrdf import InterRDF, SpeciesRDF

    def hwm_kb():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])

    def rss_kb():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    def trim():
        import ctypes
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    n = 1_000_000
    side = float(np.cbrt(n / 0.1))  # 0.1 atoms per cubic Angstrom, as water
    rng = np.random.default_rng(1)
    coords = (rng.random((1, n, 3)) * side).astype(np.float32)
    names = np.array(["O", "H", "C"])[rng.integers(0, 3, n)]
    u = make_universe(coords, [side, side, side, 90, 90, 90], names=list(names))
    del coords
    nbins = 200
    out = {"atoms": n, "box": side, "coords_bytes": 12 * n}
    for label, make, n_hist in [
        # the CPU engine (on a GPU machine 'auto' would add the CUDA context and pinned
        # frame buffers, a fixed cost outside this bound)
        ("InterRDF", lambda: InterRDF(u.atoms, u.atoms, nbins=nbins, range=(0.0, 6.0),
                                      n_threads=2, device="cpu"), 1),
        ("SpeciesRDF", lambda: SpeciesRDF(u.atoms, by="name", nbins=nbins, range=(0.0, 6.0),
                                          n_threads=2, device="cpu"), 6),
        # the all-pairs kernel (2e10 pairs: 20,000 atoms against all of them)
        ("InterRDF all pairs", lambda: InterRDF(u.atoms[:20_000], u.atoms, nbins=nbins,
                                                range=(0.0, 6.0), n_threads=2, device="cpu",
                                                method="allpairs"), 1),
    ]:
        r = make()
        u.trajectory[0]
        trim()
        base = rss_kb()
        reset_peak()
        r.run()
        peak = hwm_kb()
        out[label] = {"peak_growth_bytes": (peak - base) * 1024,
                      "histogram_bytes": n_hist * nbins * (8 * 5 + 4 * 2 * 2),
                      "method": r._engine.last_method,
                      "total_count": int(np.asarray(r.results.count_uint64).sum())}
        del r
        trim()  # hand freed memory back, so the next baseline is not inflated
    print(json.dumps(out))
    """
)


@pytest.mark.slow  # a million atoms in a subprocess: about 18 s
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_peak_rss_of_a_million_atoms_is_bounded():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: conftest.py
    paths = [here] + [p for p in sys.path if p]
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(paths)], capture_output=True,
                         text=True, timeout=600, cwd=here)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    print("\npeak RSS growth of one 1M-atom frame:", json.dumps(out, indent=1))
    coords = out["coords_bytes"]
    for label, method, min_count in (("InterRDF", "cells", 10**7),
                                     ("SpeciesRDF", "cells", 10**7),
                                     ("InterRDF all pairs", "allpairs", 10**6)):
        r = out[label]
        assert r["method"] == method
        assert r["total_count"] > min_count  # the frame really was histogrammed
        bound = r["histogram_bytes"] + 8 * coords + 16 * 2**20
        assert r["peak_growth_bytes"] <= bound, (
            f"{label}: peak RSS grew by {r['peak_growth_bytes'] / 2**20:.1f} MiB for one "
            f"1M-atom frame; histograms + 8 coordinate copies + slack = {bound / 2**20:.1f} MiB"
        )
