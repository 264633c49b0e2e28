"""The CUDA architectures CMakeLists.txt chooses, from a configure alone (no compiling).

The portable set (a machine without a GPU, or FASTRDF_CUDA_PORTABLE=ON) is three cubins from
one PTX: one front-end pass for every architecture (docs/installation.rst, "Choosing GPU
architectures"). Needs cmake, ninja and nvcc; skipped where any is missing.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cmake", "ninja", "nvcc")),
    reason="needs cmake, ninja and nvcc (the CUDA build configuration)",
)


def configure(tmp_path, *defines):
    """Configure the project in tmp_path with -D defines; the CUDA compile flags and the
    architecture list of the all-pairs kernel of an orthorhombic box."""
    try:
        import pybind11
    except ImportError:
        pytest.skip("pybind11 is not installed")
    build = tmp_path / "build"
    cmd = ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
           "-DCMAKE_BUILD_TYPE=Release", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
           f"-DPython_EXECUTABLE={sys.executable}", "-DFASTRDF_CUDA=ON", *defines]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ninja = (build / "build.ninja").read_text()
    block = ninja[ninja.index("allpairs_ortho.cu.o:"):]
    flags = re.search(r"^\s*FLAGS = (.*)$", block, re.M).group(1)
    defines_line = re.search(r"^\s*DEFINES = (.*)$", block, re.M).group(1)
    archs = re.search(r'FASTRDF_CUDA_ARCHS=\\"([^\\]*)\\"', defines_line).group(1)
    return flags, archs.split(","), defines_line


def test_portable_set_is_three_cubins_from_one_ptx(tmp_path):
    flags, archs, defines = configure(tmp_path, "-DFASTRDF_CUDA_PORTABLE=ON")
    gencodes = re.findall(r"--generate-code=arch=(compute_\d+),code=\[([^\]]*)\]", flags)
    assert len(gencodes) == 1, flags  # one front-end pass
    virtual, codes = gencodes[0]
    codes = codes.split(",")
    reals = [c for c in codes if c.startswith("sm_")]
    assert {"sm_75", "sm_80", "sm_90"} <= set(reals), codes
    assert virtual == f"compute_{min(int(c[3:]) for c in reals)}"  # the oldest's PTX
    assert virtual in codes  # embedded for later GPUs
    # what build_info() will report: each cubin, and the PTX
    assert set(archs) == {f"{c[3:]}-real" for c in reals} | {f"{virtual[8:]}-virtual"}
    assert "FASTRDF_CUDA_FAST_RULE=0" in defines  # the approximate root only on request
    assert "-lineinfo" not in flags  # line tables only on request (the same machine code)


def test_one_ptx_off_gives_one_ptx_per_architecture(tmp_path):
    flags, archs, defines = configure(tmp_path, "-DFASTRDF_CUDA_PORTABLE=ON",
                                      "-DFASTRDF_CUDA_ONE_PTX=OFF",
                                      "-DFASTRDF_CUDA_FAST_RULE=ON",
                                      "-DFASTRDF_CUDA_LINEINFO=ON")
    gencodes = re.findall(r"--generate-code=arch=(compute_\d+),code=\[([^\]]*)\]", flags)
    assert len(gencodes) >= 3, flags
    assert all(v[8:] in c for v, c in gencodes)  # each cubin from its own PTX
    assert "90-virtual" in archs
    assert "FASTRDF_CUDA_FAST_RULE=1" in defines
    assert "-lineinfo" in flags


def test_given_architectures_are_kept(tmp_path):
    flags, archs, _ = configure(tmp_path, "-DCMAKE_CUDA_ARCHITECTURES=90-real")
    assert re.findall(r"--generate-code=arch=compute_90,code=\[sm_90\]", flags), flags
    assert archs == ["90-real"]
