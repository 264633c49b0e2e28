#!/usr/bin/env python3
"""Time ``pip install .`` as a new user runs it: a clean clone, a fresh venv, an empty pip cache.

    python tools/time_build.py                      # default build (CUDA when nvcc and a GPU are found)
    python tools/time_build.py --cuda-off           # -C cmake.define.FASTRDF_CUDA=OFF
    python tools/time_build.py -C cmake.define.FASTRDF_CUDA=ON   # CUDA without a GPU too
    python tools/time_build.py -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real
    python tools/time_build.py --repeat 2 --ref HEAD

Clones the committed state of this repository (``git clone``: uncommitted changes are not
timed) into a temporary directory, makes a virtual environment there, and times
``python -m pip install . [-C ...]`` with PIP_CACHE_DIR pointing at an empty directory, so
that the build tools (scikit-build-core, pybind11, CMake, Ninja) and the run-time
dependencies are fetched and installed as on a fresh machine. Prints the command, the wall
time, ``uptime`` before and after (other jobs on the machine slow the build: read the load
beside each figure), the CPU time of the build (user + system of every process pip ran,
which other jobs change little: divided by the cores it bounds the wall time of an idle
machine from below), the number of cores, and from the build directory's ``.ninja_log`` the
longest build steps (their wall times, which the load stretches: compare them with each
other). Nothing is written in the repository.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def ninja_log(build_root: Path):
    """[(seconds, target)] of the newest build in a ``.ninja_log`` under build_root."""
    logs = sorted(build_root.rglob(".ninja_log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return [], 0.0
    seen, steps = set(), []
    for line in logs[-1].read_text().splitlines():
        if line.startswith("#"):
            continue
        start, end, _mtime, target, *_ = line.split("\t")
        key = (int(start), int(end))
        if key in seen:  # one edge with several outputs has one line per output
            continue
        seen.add(key)
        steps.append((int(start), int(end), target))
    if not steps:
        return [], 0.0
    span = (max(e for _, e, _ in steps) - min(s for s, _, _ in steps)) / 1000.0
    return sorted(((e - s) / 1000.0, t) for s, e, t in steps)[::-1], span


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda-off", action="store_true", help="-C cmake.define.FASTRDF_CUDA=OFF")
    parser.add_argument("-C", "--config-settings", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to pip install as -C KEY=VALUE (repeatable)")
    parser.add_argument("--ref", default="HEAD", help="the commit to clone (default HEAD)")
    parser.add_argument("--repeat", type=int, default=1, help="time this many fresh builds")
    parser.add_argument("--top", type=int, default=12, help="longest build steps to list")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    settings = list(args.config_settings)
    if args.cuda_off:
        settings.append("cmake.define.FASTRDF_CUDA=OFF")
    pip_args = ["install", "."] + [f"-C{s}" for s in settings]
    command = "python -m pip " + " ".join(pip_args)
    results = []
    for attempt in range(args.repeat):
        work = Path(tempfile.mkdtemp(prefix="pkg-time-"))
        try:
            src, venv, cache = work / "src", work / "venv", work / "pip-cache"
            subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(src)],
                           check=True)
            subprocess.run(["git", "-C", str(src), "checkout", "--quiet", args.ref], check=True)
            commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True, check=True).stdout.strip()
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            cache.mkdir()
            env = dict(os.environ, PIP_CACHE_DIR=str(cache), VIRTUAL_ENV=str(venv),
                       PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
            env.pop("PIP_NO_CACHE_DIR", None)
            before = uptime()
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *pip_args],
                                  cwd=src, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_s = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            after = uptime()
            if proc.returncode != 0:
                sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-4000:])
                print(f"FAILED: {command} (rc {proc.returncode})")
                return 1
            steps, span = ninja_log(src / "build")
            info = subprocess.run(
                [str(venv / "bin" / "python"), "-c",
                 "import mdakit_fastrdf as m; i = m.build_info(); "
                 "print('cpu_isa', ','.join(i['cpu_isa']), '| cuda_architectures', "
                 "','.join(i.get('cuda_architectures', [])) or '-')"],
                cwd=work, env=env, capture_output=True, text=True).stdout.strip()
            print(f"== build {attempt + 1}/{args.repeat}: commit {commit}, {os.cpu_count()} cores")
            print(f"command : (in a clean clone, fresh venv, empty PIP_CACHE_DIR) {command}")
            print(f"wall    : {wall:.1f} s")
            print(f"cpu     : {cpu_s:.1f} s user+sys of pip and every process it ran "
                  f"(/{os.cpu_count()} cores = {cpu_s / (os.cpu_count() or 1):.1f} s: the wall time "
                  f"of an idle machine if the build kept every core busy)")
            print(f"before  : {before}")
            print(f"after   : {after}")
            print(f"built   : {info}")
            if steps:
                total = sum(t for t, _ in steps)
                print(f"ninja   : {len(steps)} steps in {span:.1f} s wall, {total:.1f} s of steps "
                      f"summed (the rest of the wall time: build environment, CMake configure, "
                      f"install)")
                for t, target in steps[: args.top]:
                    print(f"  {t:7.1f} s  {target}")
            results.append(wall)
        finally:
            if args.keep:
                print(f"kept    : {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
    if len(results) > 1:
        print(f"walls   : {', '.join(f'{w:.1f}' for w in results)} s (min {min(results):.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
