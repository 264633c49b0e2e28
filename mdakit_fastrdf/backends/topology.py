"""What a node offers: CPU sockets / NUMA nodes and GPUs, read from the operating system.

Nothing here initialises CUDA: the GPUs are counted from ``CUDA_VISIBLE_DEVICES``, the
NVIDIA driver's ``/proc/driver/nvidia/gpus`` or ``nvidia-smi -L``, so that a process that
later forks workers stays free of CUDA state (see :mod:`mdakit_fastrdf.engine`).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

__all__ = ["CpuGroup", "NodeTopology", "count_gpus", "detect_topology", "parse_cpulist"]


def parse_cpulist(text: str) -> list[int]:
    """Parse a Linux CPU list such as ``'0-3,8-11'`` (``/sys/.../cpulist``) into integers."""
    cpus: list[int] = []
    text = text.strip()
    if not text:
        return cpus
    for chunk in text.split(","):
        chunk = chunk.strip()
        if not chunk:
            continue
        if "-" in chunk:
            lo, hi = chunk.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(chunk))
    return sorted(set(cpus))


@dataclass(frozen=True)
class CpuGroup:
    """The CPUs of one NUMA node (or socket) that this process may use.

    ``cpus`` are logical CPU ids; ``cores`` groups them by physical core (hyperthread
    siblings together), so ``len(cores)`` is the number of physical cores.
    """

    name: str
    cpus: tuple
    cores: tuple = ()

    @property
    def n_cores(self) -> int:
        return len(self.cores) if self.cores else len(self.cpus)


@dataclass(frozen=True)
class NodeTopology:
    """CPU groups (NUMA nodes or sockets) and the number of GPUs of a node.

    Build one by hand to plan for another machine (``NodeBackend(topology=...)``), or get
    this machine's from :func:`detect_topology`.
    """

    groups: tuple
    n_gpus: int = 0
    source: str = "given"
    gpu_source: str = ""
    notes: tuple = field(default=())

    @classmethod
    def simple(cls, cores_per_group, n_gpus=0):
        """A made-up node: ``cores_per_group`` is a list of core counts (one per socket)."""
        groups, start = [], 0
        for k, n in enumerate(cores_per_group):
            cpus = tuple(range(start, start + n))
            groups.append(CpuGroup(f"node{k}", cpus, tuple((c,) for c in cpus)))
            start += n
        return cls(tuple(groups), int(n_gpus), source="simple")

    @property
    def n_cpus(self) -> int:
        return sum(len(g.cpus) for g in self.groups)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _allowed_cpus():
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return set(range(os.cpu_count() or 1))


def _cores_of(cpus, sysfs):
    """Group logical CPUs by (package, core id): one tuple per physical core."""
    cores: dict = {}
    for c in cpus:
        base = os.path.join(sysfs, "cpu", f"cpu{c}", "topology")
        key = (_read(os.path.join(base, "physical_package_id")),
               _read(os.path.join(base, "core_id")))
        if key == (None, None):
            key = ("cpu", c)
        cores.setdefault(key, []).append(c)
    return tuple(tuple(sorted(v)) for v in sorted(cores.values()))


def _cpu_groups(sysfs, allowed):
    """CPU groups from NUMA nodes, else sockets, else one group; and where they came from."""
    nodes = []
    for path in sorted(glob.glob(os.path.join(sysfs, "node", "node[0-9]*")),
                       key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)) or 0)):
        text = _read(os.path.join(path, "cpulist"))
        if text is None:
            continue
        cpus = [c for c in parse_cpulist(text) if c in allowed]
        if cpus:
            nodes.append((os.path.basename(path), cpus))
    if nodes:
        return [(n, c) for n, c in nodes], "numa"
    sockets: dict = {}
    for c in sorted(allowed):
        pkg = _read(os.path.join(sysfs, "cpu", f"cpu{c}", "topology", "physical_package_id"))
        if pkg is None:
            sockets = {}
            break
        sockets.setdefault(pkg, []).append(c)
    if sockets:
        return [(f"socket{k}", v) for k, v in sorted(sockets.items(), key=lambda kv: int(kv[0]))], "sockets"
    return [("all", sorted(allowed))], "affinity"


def count_gpus(environ=None, proc_root="/proc", use_nvidia_smi=True) -> tuple[int, str]:
    """Count the GPUs this process may use without initialising CUDA.

    ``CUDA_VISIBLE_DEVICES`` decides when set (CUDA's own rule: the list stops at the first
    invalid entry; ``''`` or ``-1`` hides all GPUs); otherwise the driver's
    ``/proc/driver/nvidia/gpus`` entries, otherwise ``nvidia-smi -L``. Returns the count and
    where it came from.
    """
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        n = 0
        for item in env["CUDA_VISIBLE_DEVICES"].split(","):
            item = item.strip()
            if not item or item.startswith("-"):
                break
            n += 1
        return n, "CUDA_VISIBLE_DEVICES"
    entries = glob.glob(os.path.join(proc_root, "driver", "nvidia", "gpus", "*"))
    if entries:
        return len(entries), "/proc/driver/nvidia/gpus"
    if use_nvidia_smi and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20,
                                 check=False)
        except (OSError, subprocess.TimeoutExpired):
            return 0, "nvidia-smi failed"
        if out.returncode == 0:
            return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")), "nvidia-smi -L"
        return 0, "nvidia-smi failed"
    return 0, "no NVIDIA driver found"


def detect_topology(sysfs="/sys/devices/system", proc_root="/proc", environ=None,
                    allowed=None) -> NodeTopology:
    """This machine's CPU groups (NUMA nodes, else sockets) and GPUs.

    Only the CPUs this process may run on (``os.sched_getaffinity``) are listed, so a job
    confined by a batch system (cgroups, ``taskset``, ``srun --cpu-bind``) is planned
    inside its allocation. GPUs count only when this build has CUDA kernels.
    """
    allowed = _allowed_cpus() if allowed is None else set(allowed)
    raw, source = _cpu_groups(sysfs, allowed)
    groups = tuple(CpuGroup(name, tuple(cpus), _cores_of(cpus, sysfs)) for name, cpus in raw)
    from ..engine import cuda

    if cuda._cuda_module() is None:
        n_gpus, gpu_source = 0, "this build has no CUDA kernels"
    else:
        n_gpus, gpu_source = count_gpus(environ, proc_root)
    return NodeTopology(groups, n_gpus, source, gpu_source)
