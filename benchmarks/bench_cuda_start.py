"""How long a GPU worker's CUDA start takes when G processes start at once: the driver
(``cuInit`` and the primary context, through ``ctypes``) called directly, or through the
package's own early start (:func:`mdakit_fastrdf.engine.cuda.start_cuda_early`, which takes
turns on a file lock), and then the package's engine state (``Engine._make_impl``).

Each process sees one GPU (``CUDA_VISIBLE_DEVICES``), as the node backend's GPU workers do;
the last layout is one process seeing every GPU, starting the driver once and then each
GPU's primary context in turn (would one process driving all GPUs have them sooner?).
Prints, for each layout, when each GPU's driver and engine were ready (seconds from the
common start) and the mean over the GPUs: what the first frames of a cold run wait for.

Usage::

    python benchmarks/bench_cuda_start.py            # every GPU of the node
    python benchmarks/bench_cuda_start.py --gpus 2 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

_CHILD = r"""
import ctypes, json, sys, time
t_go = float(sys.argv[1])
while time.time() < t_go:
    time.sleep(0.0005)
t0 = time.time()
import numpy as np
from mdakit_fastrdf.engine import Engine
t_import = time.time()
if sys.argv[2] == "turns":  # the package's own start: GPU workers take turns (a file lock)
    from mdakit_fastrdf.engine import cuda
    cuda.start_cuda_early()
    cuda._cuda_init()  # (waits for the early start)
    t_init = t_ctx = time.time()
else:
    lib = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert lib.cuInit(0) == 0
    t_init = time.time()
    assert lib.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    t_ctx = time.time()
eng = Engine(device="cuda:0")
eng._make_impl(np.array([0, 1000], dtype=np.int64), np.array([[0, 0]], dtype=np.int32))
t_engine = time.time()
print(json.dumps({"start": t0, "import": t_import, "init": t_init, "ctx": t_ctx,
                  "engine": t_engine}))
"""


_ONE_PROCESS = r"""
import ctypes, json, sys, time
t_go = float(sys.argv[1])
while time.time() < t_go:
    time.sleep(0.0005)
t0 = time.time()
lib = ctypes.CDLL("libcuda.so.1")
assert lib.cuInit(0) == 0
t_init = time.time()
n = ctypes.c_int()
lib.cuDeviceGetCount(ctypes.byref(n))
ready = []
for k in range(n.value):
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert lib.cuDeviceGet(ctypes.byref(dev), k) == 0
    assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    ready.append(time.time())
print(json.dumps({"start": t0, "init": t_init, "ready": ready}))
"""


def one_process(n_gpus):
    """One process seeing `n_gpus` GPUs: cuInit once, then each primary context."""
    t_go = time.time() + 1.5
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(str(k) for k in range(n_gpus)))
    p = subprocess.Popen([sys.executable, "-c", _ONE_PROCESS, repr(t_go)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return t_go, _collect(p)


def _launch(gpu, t_go, how="plain"):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
    return subprocess.Popen([sys.executable, "-c", _CHILD, repr(t_go), how], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(p):
    out, err = p.communicate()
    if p.returncode != 0:
        raise RuntimeError(err[-2000:])
    return json.loads(out.strip().splitlines()[-1])


def at_once(n_gpus):
    t_go = time.time() + 1.5  # (the interpreters started and waiting)
    procs = [_launch(k, t_go) for k in range(n_gpus)]
    return t_go, [_collect(p) for p in procs]


def in_turns(n_gpus):
    """All at once, each through engine.cuda.start_cuda_early (the GPU workers' start, which
    takes turns on a file lock)."""
    t_go = time.time() + 1.5
    procs = [_launch(k, t_go, "turns") for k in range(n_gpus)]
    return t_go, [_collect(p) for p in procs]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpus", type=int, default=None)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    n = args.gpus
    if n is None:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        n = sum(line.startswith("GPU ") for line in out.splitlines())
    rows = []
    for layout, fn in (("at once", at_once), ("at once, in turns (start_cuda_early)", in_turns)):
        for g in sorted({1, n}):
            for r in range(args.repeat):
                t_go, res = fn(g)
                ctx = [x["ctx"] - t_go for x in res]
                eng = [x["engine"] - t_go for x in res]
                drv = [x["ctx"] - x["import"] for x in res]
                own = [x["engine"] - x["ctx"] for x in res]
                rows.append([layout, g, r, " / ".join(f"{v:.3f}" for v in ctx),
                             " / ".join(f"{v:.3f}" for v in eng), f"{sum(eng) / g:.3f}",
                             " / ".join(f"{v:.3f}" for v in drv),
                             " / ".join(f"{v:.3f}" for v in own)])
                print("#", rows[-1], flush=True)
    for r in range(args.repeat):
        t_go, res = one_process(n)
        ready = [t - t_go for t in res["ready"]]
        rows.append(["one process, every GPU (ctypes only)", n, r,
                     " / ".join(f"{v:.3f}" for v in ready), "-",
                     f"{sum(ready) / len(ready):.3f} (contexts)",
                     f"cuInit {res['init'] - res['start']:.3f}", "-"])
        print("#", rows[-1], flush=True)
    head = ["layout", "GPUs", "try", "context ready s", "engine ready s", "mean engine ready s",
            "driver s (each)", "engine's own s (each)"]
    print(f"\n`python benchmarks/bench_cuda_start.py --repeat {args.repeat}`: seconds from "
          "the common start (imports ~0.1-0.2 s included)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


if __name__ == "__main__":
    main()
