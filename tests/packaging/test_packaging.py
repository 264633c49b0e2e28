"""Packaging (issue 25): the sdist holds every file the build needs and builds; the wheel
installs and runs without a compiler; the conda-forge recipe and the cibuildwheel
configuration agree with pyproject.toml.

Where they run (docs/installation.rst, "Testing the packaging"):

* the sdist contents, the recipe and the cibuildwheel configuration: in CI (``python -m
  pytest tests``; the sdist comes from ``python -m build --sdist``, the ``build`` package of
  the test extra, about 20 s);
* the CPU-only build of an unpacked sdist, and that wheel installed into a fresh virtual
  environment with the compilers hidden, running ``mdakit-fastrdf --info`` and the demo: in
  CI (a few minutes on 2 cores: the CPU kernels compile once more);
* the release wheel test (``tools/build_wheel.sh``: sdist, wheel from the sdist with CUDA
  when ``nvcc`` is found, ``auditwheel repair``; then the same fresh-venv check, which
  must list the wheel's CUDA architectures): not in CI (the CUDA build alone takes minutes
  more), but with ``FASTRDF_WHEEL_TESTS=1 python -m pytest tests/packaging/test_packaging.py``, or
  ``FASTRDF_WHEEL=dist/<wheel>.whl`` to test a wheel already built.
"""

import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
CMAKELISTS = ROOT / "CMakeLists.txt"
PYPROJECT = ROOT / "pyproject.toml"
RECIPE = ROOT / "recipe" / "recipe.yaml"

#: conda-forge's names of the PyPI distributions this package depends on
CONDA_NAMES = {"mdanalysis": "mdanalysis", "numpy": "numpy", "mdanalysistests": "mdanalysistests"}


def pyproject():
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def source_version():
    text = (ROOT / "mdakit_fastrdf" / "_version.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE).group(1)


def run(cmd, **kwargs):
    """subprocess.run(cmd, capture_output=True, text=True, **kwargs) in a session of its own,
    whose processes (a build's compilers too) are all ended if the test stops early."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **kwargs) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


#: a build on 2 cores shared with other jobs can take many times its quiet time
BUILD_TIMEOUT = pytest.mark.timeout(3600)


def split_requirement(req):
    """``"MDAnalysis>=2.8"`` -> ``("mdanalysis", ">=2.8")`` (PEP 503 name, specifier)."""
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?",
                         req)
    assert match, req
    return re.sub(r"[-_.]+", "-", match.group(1)).lower(), match.group(3).replace(" ", "")


# ---- what the build needs ---------------------------------------------------------------

def cmake_named_sources():
    """The csrc/ files CMakeLists.txt names (source lists, include directories)."""
    text = CMAKELISTS.read_text(encoding="utf-8")
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # comments out
    return sorted(set(re.findall(r"\b(csrc/[\w./-]+\.(?:cpp|cu|cuh|hpp|h))\b", text)))


def cmake_include_dirs():
    text = CMAKELISTS.read_text(encoding="utf-8")
    dirs = set()
    for body in re.findall(r"target_include_directories\(\S+\s+PRIVATE\s+([^)]*)\)", text):
        dirs.update(body.split())
    return sorted(dirs)


def included_files(paths, root=ROOT):
    """Every local header reached through ``#include "..."`` from paths (relative to root),
    resolved as the compiler does: beside the including file, then in the include dirs."""
    include_dirs = [root / d for d in cmake_include_dirs()]
    todo, seen = [root / p for p in paths], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(encoding="utf-8"),
                               re.MULTILINE):
            for base in [path.parent, *include_dirs]:
                if (base / name).is_file():
                    todo.append((base / name).resolve())
                    break
            else:
                pytest.fail(f'{path.relative_to(root)}: #include "{name}" is not found')
    return sorted(str(p.relative_to(root.resolve())) for p in seen)


def tracked(prefix):
    """Files under prefix that git tracks (the files a clean clone has), or that exist when
    this is no git checkout (an unpacked sdist)."""
    if (ROOT / ".git").exists() and shutil.which("git"):
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", prefix], capture_output=True,
                             text=True, check=True).stdout.split()
        return [p for p in out if (ROOT / p).exists()]
    return [str(p.relative_to(ROOT)) for p in (ROOT / prefix).rglob("*") if p.is_file()]


def test_cmake_names_existing_sources():
    named = cmake_named_sources()
    assert "csrc/cpu/histogram.cpp" in named and "csrc/python/bindings.cpp" in named
    assert any(p.startswith("csrc/cuda/") and p.endswith(".cu") for p in named)
    missing = [p for p in named if not (ROOT / p).is_file()]
    assert not missing, f"CMakeLists.txt names files that do not exist: {missing}"


# ---- the sdist ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    """The sdist of this tree, made as a release makes it (``python -m build --sdist``)."""
    out = tmp_path_factory.mktemp("sdist")
    # run from out: in the repository, `python -m build` could find its build/ directory
    if subprocess.run([sys.executable, "-m", "build", "--version"], cwd=out,
                      capture_output=True).returncode != 0:
        pytest.skip("needs the 'build' package (the test extra has it)")
    proc = run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)],
               cwd=out)
    offline = "No matching distribution found" in proc.stdout + proc.stderr
    if proc.returncode != 0 and offline and not os.environ.get("CI"):
        # (the isolated build environment needs the package index: the lent GPU machines have
        # none; CI has one, and there this is a failure)
        pytest.skip("the sdist's build requirements cannot be installed here (no package index)")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.tar.gz")
    return path


def sdist_names(path):
    with tarfile.open(path) as tar:
        names = tar.getnames()
    top = {n.split("/", 1)[0] for n in names}
    assert len(top) == 1, top
    return {n.split("/", 1)[1] for n in names if "/" in n}


@pytest.mark.slow  # makes the sdist with python -m build in a subprocess
def test_sdist_contains_every_build_file(sdist):
    names = sdist_names(sdist)
    assert sdist.name == f"mdakit_fastrdf-{source_version()}.tar.gz"
    required = {"CMakeLists.txt", "pyproject.toml", "README.md", "LICENSE", "PKG-INFO",
                "mdakit_fastrdf/_version.py", "mdakit_fastrdf/py.typed"}
    required |= set(cmake_named_sources())  # every source file CMakeLists.txt names
    required |= set(included_files(cmake_named_sources()))  # every header they include
    required |= set(tracked("csrc"))  # every C++/CUDA file of the repository
    required |= {p for p in tracked("mdakit_fastrdf") if p.endswith((".py", ".typed"))}
    missing = sorted(required - names)
    assert not missing, f"the sdist lacks files the build needs: {missing}"
    # nothing built or cached
    built = sorted(n for n in names
                   if n.endswith((".so", ".o", ".pyd", ".dylib", ".pyc")) or n.startswith("build/"))
    assert not built, f"the sdist holds built files: {built}"


@pytest.mark.slow  # makes the sdist with python -m build in a subprocess
def test_sdist_metadata(sdist):
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/PKG-INFO"))
        pkg_info = tar.extractfile(member).read().decode()
    assert f"\nVersion: {source_version()}\n" in pkg_info
    assert "\nRequires-Python: >=3.10\n" in pkg_info
    for req in pyproject()["project"]["dependencies"]:
        name, spec = split_requirement(req)
        assert re.search(rf"^Requires-Dist: {name}{re.escape(spec)}$", pkg_info, re.MULTILINE | re.IGNORECASE), req


@pytest.fixture(scope="module")
def cpu_wheel(sdist, tmp_path_factory):
    """A CPU-only wheel built by pip from the unpacked sdist."""
    tmp_path = tmp_path_factory.mktemp("sdist-build")
    with tarfile.open(sdist) as tar:
        if sys.version_info >= (3, 12):
            tar.extractall(tmp_path, filter="data")
        else:
            tar.extractall(tmp_path)
    (src,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    env = dict(os.environ, PIP_NO_INPUT="1")
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir",
                str(tmp_path / "wheel"), "-C", "cmake.define.FASTRDF_CUDA=OFF", str(src)],
               env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    return wheel


@pytest.mark.slow  # pip builds the C++ extension from the sdist (minutes)
@BUILD_TIMEOUT
def test_sdist_builds_cpu_only(cpu_wheel):
    """The unpacked sdist builds (CPU kernels; the CUDA files are checked above) into a wheel
    that holds the compiled module and the version file."""
    with zipfile.ZipFile(cpu_wheel) as zf:
        names = zf.namelist()
    assert any(re.fullmatch(r"mdakit_fastrdf/engine/_fastrdf_cpu\..*(so|pyd)", n) for n in names)
    assert "mdakit_fastrdf/_version.py" in names
    assert not any("_fastrdf_cuda" in n for n in names)
    assert cpu_wheel.name.startswith(f"mdakit_fastrdf-{source_version()}-")


# ---- the wheel, installed where no compiler is ------------------------------------------

WHEEL_TESTS = bool(os.environ.get("FASTRDF_WHEEL_TESTS") or os.environ.get("FASTRDF_WHEEL"))


def hidden_compiler_env(tmp_path, venv):
    """An environment where no C/C++/CUDA compiler can be found: CC, CXX and CUDACXX are
    /bin/false, PATH starts with the venv and a directory whose cc, gcc, c++, g++, clang,
    clang++, nvcc, cmake and ninja fail, and pip prefers binary packages."""
    shims = tmp_path / "no-compilers"
    shims.mkdir()
    for name in ("cc", "gcc", "c++", "g++", "clang", "clang++", "nvcc", "cmake", "ninja"):
        shim = shims / name
        shim.write_text("#!/bin/sh\necho \"$0: no compiler here (tests/packaging/test_packaging.py)\" >&2\n"
                        "exit 1\n")
        shim.chmod(0o755)
    path = [str(venv / "bin"), str(shims)] + [
        p for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and not (Path(p) / "nvcc").exists()]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUDA", "FASTRDF_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(CC="/bin/false", CXX="/bin/false", CUDACXX="/bin/false", PATH=os.pathsep.join(path),
               VIRTUAL_ENV=str(venv), PIP_PREFER_BINARY="1", PIP_NO_INPUT="1",
               MPLBACKEND="Agg")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if os.environ.get("FASTRDF_WHEEL"):
        path = Path(os.environ["FASTRDF_WHEEL"]).resolve()
        assert path.is_file(), f"FASTRDF_WHEEL={path}: no such file"
        return path
    out = tmp_path_factory.mktemp("dist")
    proc = run(["bash", str(ROOT / "tools" / "build_wheel.sh"), str(out)], cwd=out)
    sys.stdout.write(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (path,) = out.glob("*.whl")
    return path


def check_wheel_in_fresh_venv(wheel, tmp_path):
    """Install wheel into a fresh virtual environment where no compiler can be found, check
    that ``mdakit-fastrdf --info`` lists the CPU variants (and the CUDA architectures of a
    CUDA wheel), and run the README's demo there. Returns the seconds ``pip install`` of the
    wheel took."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    has_cuda = any("_fastrdf_cuda" in n for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = hidden_compiler_env(tmp_path, venv)
    py = str(venv / "bin" / "python")
    t0 = time.perf_counter()
    proc = run([py, "-m", "pip", "install", str(wheel)], env=env, cwd=tmp_path)
    install_s = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    print(f"\npip install {wheel.name} into a fresh venv: {install_s:.1f} s")
    # the demo's data and plot
    proc = run([py, "-m", "pip", "install", "MDAnalysisTests", "matplotlib"], env=env,
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    cli = str(venv / "bin" / "mdakit-fastrdf")
    info = run([cli, "--info"], env=env, cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    print(info.stdout)
    lines = dict(re.findall(r"^(\w+)\s*:\s*(.*)$", info.stdout, re.MULTILINE))
    variants = lines["cpu_isa"].split(", ")
    assert variants[0] == "baseline"
    if platform.machine() in ("x86_64", "AMD64"):
        assert variants == ["baseline", "avx2", "avx512"]
    assert lines["cuda"] == ("yes" if has_cuda else "no")
    if has_cuda:
        archs = lines["cuda_architectures"].split(", ")
        assert archs and all(re.fullmatch(r"\d+-(real|virtual)", a) for a in archs), archs
        assert any(a.endswith("-virtual") for a in archs)  # PTX for later GPUs
    # the imported package is the wheel's, not this source tree
    where = run([py, "-c", "import mdakit_fastrdf; print(mdakit_fastrdf.__file__)"],
                env=env, cwd=tmp_path).stdout
    assert where.startswith(str(venv)), where
    demo = run([cli, "--plot", "rdf.png"], env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert (tmp_path / "rdf.csv").stat().st_size > 0
    assert (tmp_path / "rdf.png").read_bytes().startswith(b"\x89PNG")
    return install_s


@pytest.mark.slow  # pip builds the C++ extension from the sdist (minutes)
@BUILD_TIMEOUT
def test_cpu_wheel_installs_and_runs_without_a_compiler(cpu_wheel, tmp_path):
    """CI's share of the wheel test: the CPU-only wheel of the sdist, in a fresh venv."""
    check_wheel_in_fresh_venv(cpu_wheel, tmp_path)


@pytest.mark.slow
@BUILD_TIMEOUT
@pytest.mark.skipif(not WHEEL_TESTS, reason="builds a wheel (minutes): set FASTRDF_WHEEL_TESTS=1, "
                    "or FASTRDF_WHEEL=<path> to test a built wheel")
def test_wheel_installs_and_runs_without_a_compiler(wheel, tmp_path):
    """The release wheel (tools/build_wheel.sh: from the sdist, CUDA when nvcc is found,
    repaired by auditwheel) installs and runs without a compiler."""
    if sys.platform.startswith("linux"):
        assert re.search(r"-(manylinux|musllinux)_\d+_\d+_\w+\.whl$", wheel.name), (
            f"{wheel.name}: not a repaired (manylinux) wheel")
    if shutil.which("nvcc") and not os.environ.get("FASTRDF_WHEEL"):
        with zipfile.ZipFile(wheel) as zf:
            assert any("_fastrdf_cuda" in n for n in zf.namelist()), "nvcc is here: a CUDA wheel"
    check_wheel_in_fresh_venv(wheel, tmp_path)


# ---- the conda-forge recipe ---------------------------------------------------------------

def recipe():
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(RECIPE.read_text(encoding="utf-8"))


def flatten(requirements):
    """The requirement strings of a rattler-build list, both branches of every ``if``."""
    out = []
    for item in requirements or []:
        if isinstance(item, dict):
            out += flatten(item.get("then")) + flatten(item.get("else"))
        else:
            out.append(item)
    return out


def conda_requirement(spec):
    name, _, version = spec.partition(" ")
    return name, version.replace(" ", "")


def test_recipe_version_and_source():
    r = recipe()
    assert r["context"]["version"] == source_version()
    assert r["package"]["version"] == "${{ version }}"
    assert r["source"]["url"].endswith("/v${{ version }}.tar.gz")
    assert r["source"]["url"].startswith(pyproject()["project"]["urls"]["Source"] + "/")
    assert re.fullmatch(r"[0-9a-f]{64}", r["source"]["sha256"])


def test_recipe_run_requirements_match_pyproject():
    r = recipe()
    run = dict(conda_requirement(s) for s in flatten(r["requirements"]["run"]))
    project = pyproject()["project"]
    for req in project["dependencies"]:
        name, spec = split_requirement(req)
        conda = CONDA_NAMES.get(name, name)
        assert conda in run, f"recipe: run requirement {conda} (pyproject: {req}) missing"
        assert run[conda] == spec, f"recipe: {conda} {run[conda]} but pyproject says {req}"
    python_min = r["context"]["python_min"]
    assert project["requires-python"] == f">={python_min}"
    assert run["python"] == ">=${{python_min}}"
    expected = {CONDA_NAMES.get(split_requirement(q)[0], split_requirement(q)[0])
                for q in project["dependencies"]} | {"python", "__cuda"}
    assert set(run) == expected, f"recipe: run requirements not in pyproject: {set(run) - expected}"


def test_recipe_build_requirements_match_pyproject():
    r = recipe()
    host = dict(conda_requirement(s) for s in flatten(r["requirements"]["host"]))
    for req in pyproject()["build-system"]["requires"]:
        name, spec = split_requirement(req)
        assert host.get(name) == spec, f"recipe host: {name} {host.get(name)} vs {req}"
    build = dict(conda_requirement(s) for s in flatten(r["requirements"]["build"]))
    cmake_min = pyproject()["tool"]["scikit-build"]["cmake"]["version"]
    assert build["cmake"] == cmake_min
    assert '${{ compiler("cuda") }}' in flatten(r["requirements"]["build"])  # CUDA variant
    script = " ".join(r["build"]["script"])
    assert "--no-build-isolation" in script and "FASTRDF_CUDA_PORTABLE=ON" in script
    assert "FASTRDF_CUDA=" in script
    commands = [c for t in r["tests"] for c in t.get("script", [])]
    assert "mdakit-fastrdf --info" in commands


def test_registry_metadata_points_at_both_routes():
    """metadata.yaml: the binary route (install) and the source route (src_install); its
    comment names the conda-forge package of the recipe."""
    yaml = pytest.importorskip("yaml")
    text = (ROOT / "metadata.yaml").read_text(encoding="utf-8")
    meta = yaml.safe_load(text)
    name = pyproject()["project"]["name"]
    assert meta["install"] == [f"pip install {name}"]
    assert meta["src_install"] == [
        f"pip install git+{pyproject()['project']['urls']['Source']}@main"]
    assert recipe()["context"]["name"] == "mdakit-fastrdf"
    assert "mamba install -c conda-forge mdakit-fastrdf" in text


# ---- cibuildwheel --------------------------------------------------------------------------

def test_cibuildwheel_configuration():
    """[tool.cibuildwheel]: CPython of the classifiers, Linux x86_64 (CUDA) and aarch64,
    macOS; no Windows, musllinux or 32-bit; the portable GPU set; tests of the wheel."""
    project = pyproject()
    cibw = project["tool"]["cibuildwheel"]
    classifiers = project["project"]["classifiers"]
    pythons = sorted(c.rsplit(":: ", 1)[1] for c in classifiers
                     if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert cibw["build"] == [f"cp{v.replace('.', '')}-*" for v in pythons]
    assert {"*-win*", "*-musllinux_*", "*_i686"} <= set(cibw["skip"])
    assert cibw["linux"]["archs"] == ["x86_64", "aarch64"]
    assert cibw["macos"]["archs"] == ["x86_64", "arm64"]
    assert cibw["config-settings"]["cmake.define.FASTRDF_CUDA_PORTABLE"] == "ON"
    assert cibw["linux"]["config-settings"]["cmake.define.FASTRDF_CUDA"] == "OFF"
    assert cibw["macos"]["config-settings"]["cmake.define.FASTRDF_CUDA"] == "OFF"
    (cuda,) = [o for o in cibw["overrides"] if o["select"] == "*-manylinux_x86_64"]
    assert cuda["config-settings"]["cmake.define.FASTRDF_CUDA"] == "ON"
    script = cuda["before-all"].split()[-1].replace("{project}/", "")
    assert (ROOT / script).is_file()
    assert "mdakit-fastrdf --info" in cibw["test-command"]


def test_cibuildwheel_identifiers():
    """cibuildwheel reads the configuration and lists the builds (it needs no docker for
    that); skipped where cibuildwheel is not installed."""
    if not shutil.which("cibuildwheel"):
        pytest.skip("cibuildwheel is not installed (pip install cibuildwheel)")
    ids = {}
    for plat, archs in (("linux", "x86_64,aarch64"), ("macos", "x86_64,arm64")):
        proc = run(["cibuildwheel", "--print-build-identifiers", "--platform", plat,
                    "--archs", archs, str(ROOT)], cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        ids[plat] = set(proc.stdout.split())
    assert "cp312-manylinux_x86_64" in ids["linux"] and "cp312-manylinux_aarch64" in ids["linux"]
    assert not any("musllinux" in i or "i686" in i for i in ids["linux"])
    assert "cp312-macosx_arm64" in ids["macos"] and "cp310-macosx_x86_64" in ids["macos"]
