"""What CMakeLists.txt builds, from a configure alone (no compiling).

* The CUDA architectures it chooses: the portable set (FASTRDF_CUDA_PORTABLE=ON, or
  FASTRDF_CUDA=ON on a machine without a GPU) is three cubins from one PTX: one front-end
  pass for every architecture (docs/installation.rst, "Choosing GPU architectures").
* Whether it builds the CUDA kernels at all (issue 38): the default (FASTRDF_CUDA=AUTO)
  builds them where a GPU is visible at build time, and otherwise the CPU kernels only,
  saying so in one line; the wheels, the conda package, the GPU machines' prebuilt wheel and
  CI ask for GPU code explicitly, and get it on a machine without a GPU. The GPUs CMake
  finds are replaced by FASTRDF_TEST_NATIVE_ARCHS, so that these tests give the same on a
  machine with GPUs.

The configure tests need cmake, ninja and nvcc, and are skipped where any is missing; each
configure takes a few seconds.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

needs_cuda_toolchain = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cmake", "ninja", "nvcc")),
    reason="needs cmake, ninja and nvcc (the CUDA build configuration)",
)


def configures_cmake(test):
    """A test that configures the project with CMake in a subprocess (3 to 10 s): marked
    slow, and skipped without the CUDA toolchain."""
    return pytest.mark.slow(needs_cuda_toolchain(test))

# a machine without a GPU, whatever this one has
NO_GPU = "-DFASTRDF_TEST_NATIVE_ARCHS=NONE"


def cmake_configure(build, *defines):
    """Configure the project in the directory `build` with -D defines; CMake's output and
    the Ninja build file."""
    try:
        import pybind11
    except ImportError:
        pytest.skip("pybind11 is not installed")
    cmd = ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
           "-DCMAKE_BUILD_TYPE=Release", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
           f"-DPython_EXECUTABLE={sys.executable}", *defines]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout + out.stderr, (build / "build.ninja").read_text()


def cuda_architectures(ninja):
    """The architectures the CUDA module is built for (its FASTRDF_CUDA_ARCHS), or None
    when the build has no CUDA module."""
    if "allpairs_ortho.cu.o:" not in ninja:
        return None
    block = ninja[ninja.index("allpairs_ortho.cu.o:"):]
    defines_line = re.search(r"^\s*DEFINES = (.*)$", block, re.M).group(1)
    return re.search(r'FASTRDF_CUDA_ARCHS=\\"([^\\]*)\\"', defines_line).group(1).split(",")


def configure(tmp_path, *defines):
    """Configure with FASTRDF_CUDA=ON and -D defines; the CUDA compile flags and the
    architecture list of the all-pairs kernel of an orthorhombic box."""
    _, ninja = cmake_configure(tmp_path / "build", "-DFASTRDF_CUDA=ON", *defines)
    block = ninja[ninja.index("allpairs_ortho.cu.o:"):]
    flags = re.search(r"^\s*FLAGS = (.*)$", block, re.M).group(1)
    defines_line = re.search(r"^\s*DEFINES = (.*)$", block, re.M).group(1)
    archs = re.search(r'FASTRDF_CUDA_ARCHS=\\"([^\\]*)\\"', defines_line).group(1)
    return flags, archs.split(","), defines_line


@configures_cmake
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


@configures_cmake
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


@configures_cmake
def test_given_architectures_are_kept(tmp_path):
    flags, archs, _ = configure(tmp_path, "-DCMAKE_CUDA_ARCHITECTURES=90-real")
    assert re.findall(r"--generate-code=arch=compute_90,code=\[sm_90\]", flags), flags
    assert archs == ["90-real"]


# ---- FASTRDF_CUDA=AUTO and the explicit requests for GPU code (issue 38) ------------------

@configures_cmake
def test_default_without_a_gpu_builds_the_cpu_kernels_only(tmp_path):
    """The default on a machine without a GPU: no CUDA module, and the one line that says
    so (which the build also writes to its terminal, as pip shows no build output); a
    second configure of the same directory chooses alike, and FASTRDF_CUDA=ON then
    builds the portable set."""
    build = tmp_path / "build"
    for _ in range(2):
        log, ninja = cmake_configure(build, NO_GPU)
        assert cuda_architectures(ninja) is None
        assert "_fastrdf_cuda" not in ninja and "_fastrdf_cpu" in ninja
        lines = [line for line in log.splitlines() if "CPU kernels only" in line]
        assert len(lines) == 1, log[-3000:]
        assert lines[0].startswith("-- mdakit_fastrdf: CPU kernels only, no GPU visible")
        assert lines[0].endswith("python -m pip install . -C cmake.define.FASTRDF_CUDA=ON")
    _, ninja = cmake_configure(build, NO_GPU, "-DFASTRDF_CUDA=ON")
    assert set(cuda_architectures(ninja)) == {"75-real", "80-real", "90-real", "75-virtual"}


@configures_cmake
@pytest.mark.parametrize("seen, expected", [
    ("90", ["90-real", "90-virtual"]),
    ("80-real;90-real", ["80-real", "90-real", "80-virtual"]),
])
def test_default_with_a_gpu_builds_for_it(tmp_path, seen, expected):
    log, ninja = cmake_configure(tmp_path / "build", f"-DFASTRDF_TEST_NATIVE_ARCHS={seen}")
    assert sorted(cuda_architectures(ninja)) == sorted(expected)
    assert "CPU kernels only" not in log


def packaging_requests():
    """The CMake settings with which the wheels, the conda package, the GPU machines'
    prebuilt wheel and CI build the CUDA kernels, read from their files: {where: {name:
    value}}."""
    import tomllib  # Python >= 3.11 (the test environments' Pythons)

    def defines(text, pattern=r"-C\s*cmake\.define\.(\w+)=(\S+)"):
        # (not a setting that takes its value from the environment, as build_wheel.sh's
        # optional CMAKE_CUDA_ARCHITECTURES)
        return {k: v.strip('"') for k, v in re.findall(pattern, text) if "$" not in v}

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    cibw = pyproject["tool"]["cibuildwheel"]
    (x86,) = [o for o in cibw["overrides"] if o["select"] == "*-manylinux_x86_64"]
    requests = {}
    for where, settings in (("cibuildwheel", cibw["config-settings"]),
                            ("cibuildwheel manylinux x86_64", x86["config-settings"])):
        requests[where] = {k.removeprefix("cmake.define."): v for k, v in settings.items()}
    recipe = (ROOT / "recipe" / "recipe.yaml").read_text()
    # the CUDA variant's value of ${{ "ON" if cuda_compiler_version != "None" else "OFF" }}
    recipe = re.sub(r'\$\{\{ "ON" if cuda_compiler_version != "None" else "OFF" \}\}', "ON",
                    recipe)
    requests["conda (CUDA variant)"] = defines(recipe)
    prebuild = (ROOT / "tools" / "prebuild_gpu_wheel.sh").read_text()
    requests["tools/prebuild_gpu_wheel.sh"] = defines(prebuild.replace("${arch}", "90"))
    build_wheel = (ROOT / "tools" / "build_wheel.sh").read_text()
    requests["tools/build_wheel.sh"] = defines(build_wheel.replace("${FASTRDF_CUDA:-AUTO}",
                                                                   "AUTO"),
                                               r'"cmake\.define\.(\w+)=([^"]+)"')
    requests[".ci/run"] = defines((ROOT / ".ci" / "run").read_text())
    return requests


@pytest.mark.parametrize("where", ["cibuildwheel", "cibuildwheel manylinux x86_64",
                                   "conda (CUDA variant)", "tools/prebuild_gpu_wheel.sh",
                                   "tools/build_wheel.sh", ".ci/run"])
def test_gpu_builds_ask_for_gpu_code(where):
    """Where GPU code is wanted it is asked for (FASTRDF_CUDA=ON or FASTRDF_CUDA_PORTABLE=ON),
    not left to the default, which builds none on a machine without a GPU; and the
    packages ask for the portable set."""
    settings = packaging_requests()[where]
    assert settings.get("FASTRDF_CUDA") == "ON" or settings.get("FASTRDF_CUDA_PORTABLE") == "ON", \
        settings
    if where in ("cibuildwheel", "cibuildwheel manylinux x86_64", "conda (CUDA variant)",
                 "tools/build_wheel.sh"):
        assert settings.get("FASTRDF_CUDA_PORTABLE") == "ON", settings


def test_ci_compiles_the_cuda_kernels_or_says_why_not():
    """CI compiles the CUDA code for one architecture, and says so when it cannot."""
    settings = packaging_requests()[".ci/run"]
    assert settings.get("FASTRDF_CUDA") == "ON", settings
    assert re.fullmatch(r"\d+-real", settings.get("CMAKE_CUDA_ARCHITECTURES", "")), settings
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'echo "SKIPPED: no CUDA compiler (nvcc)' in ci


@configures_cmake
def test_gpu_builds_get_gpu_code_without_a_gpu(tmp_path):
    """Configured as each of those asks, on a machine without a GPU: the CUDA module, for
    the portable set or the architecture named."""
    portable = {"75-real", "80-real", "90-real", "75-virtual"}
    seen = {}
    for where, settings in packaging_requests().items():
        keep = {k: v for k, v in settings.items()
                if k in ("FASTRDF_CUDA", "FASTRDF_CUDA_PORTABLE", "CMAKE_CUDA_ARCHITECTURES")}
        key = tuple(sorted(keep.items()))
        if key not in seen:  # one configure for each distinct request
            _, ninja = cmake_configure(tmp_path / f"build{len(seen)}", NO_GPU,
                                       *(f"-D{k}={v}" for k, v in key))
            seen[key] = cuda_architectures(ninja)
        archs = seen[key]
        assert archs is not None, where
        expected = ({keep["CMAKE_CUDA_ARCHITECTURES"]} if "CMAKE_CUDA_ARCHITECTURES" in keep
                    else portable)
        assert set(archs) == expected, (where, archs)
