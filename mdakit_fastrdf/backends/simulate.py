"""The node backend's scheduler run on stand-in workers of given rates, in virtual time.

:func:`simulate` drives the same :class:`~.scheduler.Scheduler` as the node backend with
workers that compute a frame in ``1 / rate`` seconds, so that a plan can be judged on
machines one does not have (8 GPUs, 128 cores) from rates measured on the ones one has.

The model (stated, so that a measurement can be held against it):

* GPU worker ``k`` starts ``gpu_start_s`` after the run begins (fork, CUDA context) and
  computes ``gpu_rates[k]`` frames/s; CPU workers start after ``cpu_start_s`` and compute
  ``cpu_rates[j]`` frames/s, reading their own frames.
* Readers decode ``decode_rate`` frames/s in all (None: without limit). The fed GPU
  workers share it in proportion to their rates: a GPU worker computes
  ``min(rate, decode_rate * rate / sum of fed rates)`` frames/s.
* Each part costs ``part_overhead_s`` more (the message, the analysis's set-up, the
  device's synchronisation at its end).
* A cancelled copy stops at the end of the frame it is computing.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from .scheduler import Scheduler, WorkerState, guided_sizes

__all__ = ["SimulatedRun", "simulate"]


@dataclass
class SimulatedRun:
    wall_s: float
    n_frames: int
    frames: dict          # rank -> frames of the parts it finished
    kinds: dict           # rank -> 'gpu' / 'cpu'
    stats: dict

    @property
    def rate(self):
        return self.n_frames / self.wall_s if self.wall_s > 0 else math.inf


def simulate(n_frames, *, gpu_rates=(), cpu_rates=(), decode_rate=None, gpu_start_s=0.4,
             cpu_start_s=0.05, part_overhead_s=0.003, sizes=None, lookahead=64,
             tick_s=0.02) -> SimulatedRun:
    """Run the scheduler over ``n_frames`` frames on stand-in workers (see the module).

    `sizes`: the parts (default: :func:`guided_sizes` over the GPU workers, or over the
    CPU workers when there are none, as the node backend cuts them). Returns a
    :class:`SimulatedRun`; ``wall_s`` ends when the last part is done (a cancelled copy
    still running is not waited for, as in the node backend)."""
    gpu_rates, cpu_rates = list(gpu_rates), list(cpu_rates)
    n_workers = len(gpu_rates) + len(cpu_rates)
    if n_workers == 0:
        raise ValueError("simulate: give gpu_rates and/or cpu_rates")
    if sizes is None:
        sizes = guided_sizes(n_frames, len(gpu_rates) or n_workers)
    if sum(sizes) != n_frames:
        raise ValueError("simulate: sizes must add up to n_frames")
    fed_total = sum(gpu_rates)
    rates, starts, states = {}, {}, []
    for k, g in enumerate(gpu_rates):
        eff = g if decode_rate is None else min(g, decode_rate * g / fed_total)
        rates[k], starts[k] = eff, gpu_start_s
        states.append(WorkerState(k, "gpu", fed=decode_rate is not None, lookahead=lookahead))
    for j, c in enumerate(cpu_rates):
        r = len(gpu_rates) + j
        rates[r], starts[r] = c, cpu_start_s
        states.append(WorkerState(r, "cpu"))
    sched = Scheduler(sizes, states)
    events = []  # (time, seq, kind, rank, token)
    seq = 0
    running = {}  # rank -> (idx, t_start, token)
    version = dict.fromkeys(rates, 0)

    def push(t, kind, rank, token=None):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, rank, token))

    def start_next(rank, now):
        w = sched.workers[rank]
        if rank in running or not w.outstanding:
            return
        while w.fed and sum(sched.sizes[i] for i in w.outstanding) < w.lookahead:
            if not sched.on_more(rank, now):
                break
        idx = w.outstanding[0]
        version[rank] += 1
        token = version[rank]
        if sched.done[idx]:  # cancelled before it began: drained at once
            running[rank] = (idx, now, token)
            push(now, "cancelled", rank, token)
            return
        running[rank] = (idx, now, token)
        push(now + sched.sizes[idx] / rates[rank] + part_overhead_s, "done", rank, token)

    for st in states:
        if st.fed:
            sched.initial(st.rank, 0.0)
        push(starts[st.rank], "ready", st.rank)
    now = 0.0
    wall = None
    while events:
        now, _, kind, rank, token = heapq.heappop(events)
        if kind == "ready":
            sched.on_ready(rank, now)
            start_next(rank, now)
        elif kind == "tick":
            for r, _idx in sched.idle(now):
                start_next(r, now)
        else:
            if rank not in running or running[rank][2] != token:
                continue  # stale
            idx, t_start, _ = running.pop(rank)
            if kind == "done":
                won, cancel, _send = sched.on_done(rank, idx, now - t_start, now)
                if won and sched.finished and wall is None:
                    wall = now
                for c in cancel:  # the other copies stop at the end of their frame
                    for r, (i2, t2, tok2) in list(running.items()):
                        if i2 == c:
                            done_frames = math.floor((now - t2) * rates[r])
                            t_stop = t2 + (done_frames + 1) / rates[r]
                            version[r] += 1
                            running[r] = (i2, t2, version[r])
                            push(max(now, t_stop), "cancelled", r, version[r])
            else:
                sched.on_cancelled(rank, idx, now - t_start, now)
            if wall is not None:
                break
            start_next(rank, now)
        if wall is None and not any(e[2] == "tick" for e in events) and any(
                sched.workers[r].ready and not sched.workers[r].outstanding for r in rates):
            push(now + tick_s, "tick", -1)
    if wall is None:
        raise RuntimeError("simulate: the run did not finish (a scheduler bug)")
    frames = {w.rank: w.frames for w in states}
    return SimulatedRun(wall, n_frames, frames, {w.rank: w.kind for w in states},
                        dict(sched.stats))
