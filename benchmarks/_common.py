"""What every benchmark shares: the machine line it prints (CPU model, usable cores, load,
the package's build (SIMD variant, CUDA) and the versions of the peers a script compares
with) and its best-of-N timing."""

from __future__ import annotations

import math
import os
import platform
import time


def version(name: str) -> str:
    """``name.__version__``, or ``'absent'`` when the package is not installed."""
    try:
        return __import__(name).__version__
    except Exception:  # noqa: BLE001 - any import failure means the peer is absent
        return "absent"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def describe(peers=()) -> str:
    """One line: the CPU, its usable cores and load, mdakit_fastrdf's build, Python and the
    versions of the packages in `peers`."""
    import mdakit_fastrdf

    info = mdakit_fastrdf.build_info()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    line = (f"{cpu_model()}, {usable_cores()} cores usable, load {load:.1f}; mdakit_fastrdf "
            f"{mdakit_fastrdf.__version__} ({info['cpu_isa_selected']}, cuda={info['cuda']}); "
            f"python {platform.python_version()}")
    return line + "".join(f"; {name} {version(name)}" for name in peers)


def best_of(fn, repeat=3, warmup=0, clock=time.perf_counter):
    """Calls `fn()` `warmup` times untimed, then `repeat` times, each timed alone with
    `clock`: returns (the fastest call's seconds, the last call's result)."""
    for _ in range(warmup):
        fn()
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = clock()
        out = fn()
        best = min(best, clock() - t0)
    return best, out


def best_of_cpu(fn, repeat=3):
    """`repeat` timed calls of `fn()`: returns (the fastest call's wall seconds, the process
    CPU seconds of that call, the last call's result)."""
    best, cpu, out = math.inf, math.nan, None
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        if t < best:
            best, cpu = t, c
    return best, cpu, out
