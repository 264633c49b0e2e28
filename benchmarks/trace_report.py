"""Summarise a node run's trace (``MDAKIT_FASTRDF_TRACE=DIR``, see
:mod:`mdakit_fastrdf.backends.trace`): where the run's wall time went.

    MDAKIT_FASTRDF_TRACE=/tmp/tr python my_script.py
    python benchmarks/trace_report.py /tmp/tr

Prints the parent's phases (seconds from ``run()``), each process's start (entry,
unpickled, ready, warm, first frame), each compute worker's frames: seconds waited for
them and seconds of the analysis's own work per frame (median, mean, first), the gap
between its last frame and the end of the run, and the readers' seconds per frame.
One run per directory (a warm engine's several runs: the first ``run`` on).
"""

from __future__ import annotations

import collections
import glob
import itertools
import json
import os
import statistics
import sys


def load(directory):
    events = []
    for path in glob.glob(os.path.join(directory, "trace-*.jsonl")):
        with open(path) as f:
            events.extend(json.loads(line) for line in f if line.strip())
    events.sort(key=lambda e: e["t"])
    return events


def report(directory, out=sys.stdout):
    """Print each run of the trace in `directory` (a warm engine's several runs: one after
    the other, the events of each run's window); returns the last run's summary."""
    ev = load(directory)
    if not ev:
        print(f"no trace in {directory}", file=out)
        return {}
    starts = [e["t"] for e in ev if e["role"] == "parent" and e["event"] == "run"]
    if len(starts) <= 1:
        return _report_run(directory, ev, out)
    summary = {}
    bounds = [*starts[1:], float("inf")]
    for k, (a, b) in enumerate(zip(starts, bounds, strict=True)):
        summary = _report_run(f"{directory} (run {k + 1})",
                              [e for e in ev if a <= e["t"] < b], out)
    return summary


def _report_run(directory, ev, out):
    parent = [e for e in ev if e["role"] == "parent"]
    t0 = next((e["t"] for e in parent if e["event"] == "run"), ev[0]["t"])
    rel = lambda e: e["t"] - t0
    summary = {}
    print(f"## trace {directory}", file=out)
    print("parent: " + ", ".join(
        f"{e['event']}{'(' + str(e.get('rank')) + ')' if 'rank' in e else ''} {rel(e):.3f}"
        for e in parent if e["event"] not in ("done",)), file=out)
    done = [e for e in parent if e["event"] == "done"]
    if done:
        print(f"parts back: first {rel(done[0]):.3f} s, last {rel(done[-1]):.3f} s "
              f"({len(done)} parts)", file=out)
    by_pid = collections.defaultdict(list)
    for e in ev:
        if e["role"] != "parent":
            by_pid[e["pid"]].append(e)
    readers, workers = [], []
    for pid, es in by_pid.items():
        roles = {e["role"] for e in es} - {"fed"}
        (readers if roles == {"reader"} else workers).append((pid, es))
    end = rel(next((e for e in reversed(parent) if e["event"] == "loop_end"), parent[-1]))
    for pid, es in sorted(workers, key=lambda x: x[1][0].get("rank", 0)):
        kind = next((e["role"] for e in es if e["role"] != "fed"), "?")
        first = {}
        for e in es:
            first.setdefault(e["event"], rel(e))
        frames = [e for e in es if e["event"] == "frame"]
        ends = [e for e in es if e["event"] == "frame_end"]
        work = [b["t"] - a["t"] for a, b in zip(frames, ends, strict=False)]
        waits = [a["wait"] for a in frames]
        line = (f"{kind} pid {pid}: " + ", ".join(f"{k} {v:.3f}" for k, v in first.items()
                                                 if k in ("entry", "payload", "unpickled", "client",
                                                          "layout", "warm", "part", "frame")))
        span = next((e.get("cuda_start") for e in es if e["event"] == "warm"), None)
        if span and span[1] >= t0:  # the early driver start's thread (engine.cuda.start_cuda_early)
            line += f", driver started {span[0] - t0:.3f}..{span[1] - t0:.3f}"
        if work:
            busy = sum(work)
            line += (f"; {len(work)} frames: work median {1e3 * statistics.median(work):.2f} ms, "
                     f"mean {1e3 * busy / len(work):.2f} ms, first {1e3 * work[0]:.1f} ms; "
                     f"waited {sum(waits):.3f} s; last frame done {rel(ends[-1]):.3f}, run's loop "
                     f"ended {end:.3f}")
            summary[pid] = {"kind": kind, "frames": len(work), "work_s": busy,
                            "wait_s": sum(waits), "first_frame": first.get("frame"),
                            "median_ms": 1e3 * statistics.median(work)}
        parts = [e for e in es if e["event"] in ("part", "part_end")]
        gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(parts)
                if a["event"] == "part_end" and b["event"] == "part"]
        if gaps:
            line += f"; between parts {sum(gaps):.3f} s"
        print(line, file=out)
    reads = [e["secs"] for _, es in readers for e in es if e["event"] == "read"]
    if readers:
        starts = sorted(next((rel(e) for e in es if e["event"] == "unpickled"), float("nan"))
                        for _, es in readers)
        print(f"{len(readers)} readers: unpickled {starts[0]:.3f}..{starts[-1]:.3f} s; "
              + (f"{len(reads)} frames read, median {1e3 * statistics.median(reads):.1f} ms each"
                 if reads else "no frame read"), file=out)
    return summary


if __name__ == "__main__":
    for d in sys.argv[1:]:
        report(d)
