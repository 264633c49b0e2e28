"""The machine line every benchmark prints: CPU model, usable cores, load, the package's
build (SIMD variant, CUDA) and the versions of the peers a script compares with."""

from __future__ import annotations

import os
import platform


def version(name: str) -> str:
    """``name.__version__``, or ``'absent'`` when the package is not installed."""
    try:
        return __import__(name).__version__
    except Exception:  # noqa: BLE001 - any import failure means the peer is absent
        return "absent"


def describe(peers=()) -> str:
    """One line: the CPU, its usable cores and load, mdakit_fastrdf's build, Python and the
    versions of the packages in `peers`."""
    import mdakit_fastrdf

    info = mdakit_fastrdf.build_info()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    line = (f"{cpu}, {ncpu} cores usable, load {load:.1f}; mdakit_fastrdf "
            f"{mdakit_fastrdf.__version__} ({info['cpu_isa_selected']}, cuda={info['cuda']}); "
            f"python {platform.python_version()}")
    return line + "".join(f"; {name} {version(name)}" for name in peers)
