"""The node backend's scheduler (backends/scheduler.py) and its simulation (simulate.py).

The scheduler is pure policy, so its rules are checked here event by event; the simulation
runs it on stand-in workers of given rates (1, 2, 4 and 8 GPUs, CPU workers of several
speeds) in virtual time. The last tests run real worker processes: a cancelled copy of a
part stops at its next frame, and the run does not wait for it.
"""

import itertools
import time

import numpy as np
import pytest
from stragglers import SlowWorkerLateHelperRDF

from mdakit_fastrdf import InterRDF
from mdakit_fastrdf.backends import NodeBackend
from mdakit_fastrdf.backends.frames import (
    CancelFlags,
    PartCancelled,
    WorkerFrames,
    current_part,
)
from mdakit_fastrdf.backends import scheduler
from mdakit_fastrdf.backends.scheduler import Scheduler, WorkerState, guided_sizes
from mdakit_fastrdf.backends.simulate import simulate
from mdakit_fastrdf.backends.topology import NodeTopology, detect_topology


def test_guided_sizes_shrink_and_cover():
    for n, w in [(1, 1), (7, 3), (600, 2), (600, 8), (10_000, 4)]:
        sizes = guided_sizes(n, w)
        assert sum(sizes) == n
        assert all(a >= b for a, b in itertools.pairwise(sizes))
        assert sizes[-1] == 1
        assert sizes[0] == -(-n // (2 * w))
    assert guided_sizes(0, 2) == []
    assert guided_sizes(100, 2, max_size=10)[0] == 10
    # far fewer parts than frames: a part costs a synchronisation and a message
    assert len(guided_sizes(600, 2)) < 30


def _sched(sizes, kinds, **kw):
    return Scheduler(sizes, [WorkerState(r, k, **kw) for r, k in enumerate(kinds)])


def test_fast_workers_take_parts_in_order_and_duplicate_the_last():
    s = _sched([4, 3, 2, 1], ["gpu", "gpu"])
    assert s.on_ready(0, 0.0) == [0]
    assert s.on_ready(1, 0.0) == [1]
    assert s.on_done(1, 1, 0.3, 0.3) == (True, [], [2])   # 10 frames/s
    assert s.on_done(1, 2, 0.2, 0.5) == (True, [], [3])
    assert s.on_done(1, 3, 0.1, 0.6)[2] == []  # part 0 (4 frames) ends at ~0.4 at its rate
    # worker 0 has no rate yet: its part is assumed half done after 0.6 s (end 1.2 s);
    # worker 1 would take 1.5 * 0.4 + 0.05 s: the duplicate is worth it
    assert s.idle(0.7) == [(1, 0)]
    won, cancel, _ = s.on_done(1, 0, 0.4, 1.1)
    assert won and cancel == [0]  # the copy at worker 0 is to be cancelled
    assert s.finished and s.stats["duplicates_won"] == 1
    assert s.on_cancelled(0, 0, 1.1, 1.2) == []


def test_second_copy_does_not_count():
    s = _sched([2, 2], ["gpu", "gpu"])
    s.on_ready(0, 0.0), s.on_ready(1, 0.0)
    s.on_done(1, 1, 0.2, 0.2)
    assert s.idle(5.0) == [(1, 0)]
    assert s.on_done(0, 0, 5.0, 5.0)[:2] == (True, [0])
    assert s.on_done(1, 0, 0.2, 5.1)[0] is False


def test_cpu_worker_beside_gpus_takes_only_what_it_finishes_in_time(monkeypatch):
    monkeypatch.setattr(scheduler, "PROBE_S", 1.0)  # (600 frames: 2 s of the GPUs' work)
    sizes = guided_sizes(600, 2)
    s = _sched(sizes, ["gpu", "gpu", "cpu"])
    assert s.on_ready(0, 0.0) == [0] and s.on_ready(1, 0.0) == [1]
    assert s.on_ready(2, 0.0) == []  # it waits for the GPU workers' first rate
    s.on_done(0, 0, sizes[0] / 150, sizes[0] / 150)
    # before it has a rate a CPU worker takes the shortest part open to it, not the next
    first = s.idle(sizes[0] / 150)
    assert len(first) == 1 and first[0][0] == 2
    first = [first[0][1]]
    assert sizes[first[0]] < sizes[2]
    # 4 tail parts (2 per GPU worker) are never open to it
    assert first[0] not in list(s.pending)[-4:]
    # GPUs at 150 frames/s each, the CPU at 2 frames/s: it takes nothing the GPUs
    # would finish first
    s.on_done(1, 1, sizes[1] / 150, sizes[1] / 150)
    t = sizes[0] / 150
    assert s.on_done(2, first[0], sizes[first[0]] / 2.0, t)[2] == []
    assert s.stats["cpu_parts_declined"] >= 1


@pytest.mark.parametrize("n_frames, probes", [(600, False), (6000, True)])
def test_cpu_worker_probes_only_a_run_long_enough(n_frames, probes):
    """A CPU worker's first part (its rate unknown) only while the GPUs have more than
    PROBE_S seconds of frames left: 600 frames at 300 frames/s leave too few."""
    sizes = guided_sizes(n_frames, 2)
    s = _sched(sizes, ["gpu", "gpu", "cpu"])
    s.on_ready(0, 0.0), s.on_ready(1, 0.0), s.on_ready(2, 0.0)
    t = sizes[0] / 150
    s.on_done(0, 0, t, t)
    got = s.idle(t)
    assert (got != [] and got[0][0] == 2) is probes, got
    assert (s._fast_left(t) / s._fast_rate() >= scheduler.PROBE_S) is probes


@pytest.mark.parametrize("wait_s, takes", [(0.01, True), (0.2, False)])
def test_cpu_worker_takes_nothing_while_fed_gpus_wait_for_frames(wait_s, takes):
    """Beside GPU workers fed by readers, a CPU worker takes a part only while the GPUs do
    not wait for their frames beyond their longest single wait (the first frames): three
    parts of 1 s, each waiting 0.2 s, starve (0.4 s of 3.1 s); 0.01 s each does not."""
    s = Scheduler([50] * 40, [WorkerState(0, "gpu", fed=True, lookahead=8),
                              WorkerState(1, "cpu")])
    assert s.on_ready(0, 0.0) == [0] and s.on_ready(1, 0.0) == []
    s.on_done(0, 0, 0.1, 0.1, wait_s=0.1)  # its first part: the first frames' wait
    for k in (1, 2, 3):
        assert s.on_done(0, k, 1.0, 0.1 + k, wait_s=wait_s)[0]
    assert s.readers_limit() is not takes
    got = s.idle(3.1)
    assert (got != []) is takes, got
    assert (s.stats["cpu_parts_declined"] >= 1) is not takes


def test_a_short_run_starts_every_fed_worker_with_its_share():
    """40 frames, 2 fed GPU workers whose rings and lookahead (30) exceed their share:
    each starts with at most half the frames, not the first one with 31 of them (a warm
    engine's 40-frame XTC run on 2x H200 then read worker 0's frames first: 24 / 16
    frames and 0.43 s; benchmarks/NOTES.md)."""
    sizes = guided_sizes(40, 2)
    s = _sched(sizes, ["gpu", "gpu"], fed=True, lookahead=30)
    a, b = s.initial(0), s.initial(1)
    na, nb = (sum(sizes[i] for i in x) for x in (a, b))
    assert 0 < na <= 20 and 0 < nb <= 20, (na, nb)
    assert na + nb >= 36


@pytest.mark.parametrize("wait_s, duplicated", [(0.0, True), (0.29, False)])
def test_a_fed_worker_duplicates_only_what_it_can_read_in_time(wait_s, duplicated):
    """A fed worker's duplicate needs its frames read anew. Worker 1 (100 frames/s) ends
    its part at 0.3 s with part 0 (10 frames, no rate yet: expected at 0.6 s) left to
    worker 0: its copy would end at 0.5 s without reading, 0.79 s after the 0.29 s its
    own frames took to arrive, which is too late (at the end of a 40-frame warm XTC run
    on 2x H200 such a copy waited for its frame, and the run ended with its worker busy)."""
    s = _sched([10, 1], ["gpu", "gpu"], fed=True, lookahead=20)
    assert s.initial(0) == [0] and s.initial(1) == [1]
    s.on_ready(0, 0.0)
    s.on_ready(1, 0.0)
    won, cancel, send = s.on_done(1, 1, 0.01, 0.3, wait_s)
    assert won and cancel == []
    assert send == ([0] if duplicated else [])


def test_a_fed_owner_s_finish_leaves_out_its_wait_for_the_first_frames():
    """The end of a warm 40-frame XTC run on 2x H200 (call 5's trace, benchmarks/NOTES.md):
    worker 0 took 0.238 s for its first part of 10 frames, 0.167 s of it waiting for the
    readers, and holds parts of 8, 1 and 1 frames (read already) from 0.313 s. Worker 1
    (rate ~80 frames/s, 0.094 s of feed latency) is idle at 0.367 s: worker 0 ends the last
    part at ~0.39 s (it did, at 0.398), so no copy; at the rate with the wait counted (42
    frames/s) it would end at ~0.55 s and worker 1 copied it, then waited for its reading."""
    sizes = [10, 6, 8, 1, 1]
    s = _sched(sizes, ["gpu", "gpu"], fed=True, lookahead=30)
    s.workers[0].outstanding.extend([0])
    s.owners[0].add(0)
    s.workers[1].outstanding.extend([1])
    s.owners[1].add(1)
    s.pending.clear()
    s.on_ready(0, 0.075)
    s.on_ready(1, 0.08)
    for i in (2, 3, 4):
        s._give(s.workers[0], i, 0.2)
    s.workers[0].t0 = 0.075
    won, _, send = s.on_done(0, 0, 0.238, 0.313, 0.167)
    assert won and send == []
    assert s.finish_times(s.workers[0], 0.367)[4] < 0.42
    won, _, send = s.on_done(1, 1, 0.075, 0.367, 0.094)
    assert won and send == []


def test_fed_worker_takes_parts_ahead_only_when_asked():
    s = _sched([5, 5, 5, 5, 5], ["gpu", "gpu"], fed=True, lookahead=6)
    assert s.initial(0) == [0, 1]  # 10 frames >= lookahead 6
    assert s.initial(1) == [2, 3]
    assert s.on_ready(0, 0.1) == []
    assert s.on_more(1, 0.2) == [4]
    assert s.on_more(0, 0.2) == []  # none left


@pytest.mark.parametrize("n_frames", [200, 600, 2000])
@pytest.mark.parametrize("n_gpus", [1, 2, 4, 8])
def test_simulated_hybrid_never_loses_much_to_gpus_alone(n_frames, n_gpus):
    """CPU workers of any speed beside GPU workers: within 1.5 % of the GPUs alone (the
    cost of a CPU worker's first part, whose length nobody knows, being recomputed by a
    GPU at the end), and faster when the CPUs are fast enough to help."""
    alone = simulate(n_frames, gpu_rates=[150] * n_gpus)
    for cpu in (0.5, 2.4, 10, 40, 100):
        both = simulate(n_frames, gpu_rates=[150] * n_gpus, cpu_rates=[cpu] * 4)
        assert both.rate >= 0.985 * alone.rate, (cpu, both.rate, alone.rate, both.stats)
        assert sum(both.frames.values()) >= n_frames


def test_simulated_slow_cpu_workers_do_not_hold_the_run():
    """The issue's 40-s run: CPU workers at 2.4 frames/s beside two GPU workers at
    ~100 frames/s. They take little, and the run ends with the GPUs."""
    alone = simulate(600, gpu_rates=[100, 100], decode_rate=200)
    both = simulate(600, gpu_rates=[100, 100], cpu_rates=[2.4, 2.4], decode_rate=200)
    assert both.wall_s < 1.02 * alone.wall_s
    assert max(both.frames[2], both.frames[3]) <= 10


def test_simulated_efficiency_at_8_gpus():
    """The efficiency the design reaches with 8 GPUs at the measured 2-GPU node's rates
    (docs/performance.rst): the start-up and the per-part cost are what it loses."""
    one = simulate(2400, gpu_rates=[150])
    eight = simulate(2400, gpu_rates=[150] * 8)
    eff = eight.rate / (8 * one.rate)
    assert 0.6 < eff < 1.0
    # without the start-up (a warm engine) the parts' balance is all that is left
    one_w = simulate(2400, gpu_rates=[150], gpu_start_s=0.0)
    eight_w = simulate(2400, gpu_rates=[150] * 8, gpu_start_s=0.0)
    assert eight_w.rate / (8 * one_w.rate) > 0.95


def test_simulation_needs_workers_and_matching_sizes():
    with pytest.raises(ValueError, match="gpu_rates"):
        simulate(10)
    with pytest.raises(ValueError, match="sizes"):
        simulate(10, gpu_rates=[1.0], sizes=[3, 3])


# -- cancellation in real processes --------------------------------------------------------


def test_cancel_flags_stop_worker_frames(tmp_path):
    flags = CancelFlags.new(3, str(tmp_path))
    other = CancelFlags(*flags.spec())  # as a worker maps it
    frames = WorkerFrames([f"frame{i}" for i in range(5)], range(5))
    current_part(other, 1)
    try:
        it = iter(frames)
        assert next(it) == "frame0"
        flags.cancel(1)
        with pytest.raises(PartCancelled):
            next(it)
    finally:
        current_part()
    assert list(WorkerFrames(["a", "b"], [0, 1])) == ["a", "b"]  # no part set: no check
    flags.close(unlink=True)


def test_losing_copy_is_cancelled_and_not_awaited(adk_water):
    """Two CPU workers, one slow: its long part is recomputed by the fast worker, the slow
    copy stops at its next frame (reported as cancelled), and the run ends with the fast
    worker, not after the slow one's 1.5 s frames."""
    if sum(len(g.cpus) for g in detect_topology().groups) < 2:
        pytest.skip("needs two cores")
    ow = adk_water.select_atoms("name OW")[:200]
    ser = InterRDF(ow, ow, nbins=50, range=(0.0, 8.0)).run()
    backend = NodeBackend(gpus=None, cpu_workers=2, part_frames=5)
    t0 = time.perf_counter()
    par = SlowWorkerLateHelperRDF(ow, ow, nbins=50, range=(0.0, 8.0)).run(backend=backend)
    wall = time.perf_counter() - t0
    np.testing.assert_array_equal(par.results.count_uint64, ser.results.count_uint64)
    run = backend.last_run
    assert run["duplicates_won"] >= 1, run
    slow = next(w for w in run["workers"] if w["rank"] == 0)
    assert slow["frames"] == 0, run
    # the slow worker's 5-frame part would take 7.5 s; the run ends long before
    assert wall < 6.0, run


def test_planning_for_one_to_eight_gpus():
    """Stand-in topologies of 1, 2, 4 and 8 GPUs on 16 cores per GPU: one worker per GPU,
    readers on the rest, and parts cut over the GPU workers."""
    for g in (1, 2, 4, 8):
        topo = NodeTopology.simple([8 * g, 8 * g], n_gpus=g)
        b = NodeBackend(topology=topo, _gpu_standin=True)
        plan = b.plan("auto")
        assert sum(s.kind == "gpu" for s in plan) == g
        readers = [s for s in plan if s.kind == "reader"]
        used = [c for s in plan for c in s.cpus]
        assert len(readers) >= 16 * g - 4 * g and len(set(used)) == 16 * g
        assert b.part_sizes(600) == guided_sizes(600, g)


@pytest.mark.parametrize("n_gpus", [1, 2, 4, 8])
def test_one_to_eight_standin_gpus_give_the_serial_counts(adk_water, n_gpus):
    """Real processes for a node of 1, 2, 4 or 8 GPUs (CPU stand-ins, 4 CPUs per GPU,
    unpinned on this machine): a GPU worker per GPU fed by the readers of the other CPUs,
    guided parts, the same counts as serial."""
    ow = adk_water.select_atoms("name OW")[:300]
    ser = InterRDF(ow, ow, nbins=50, range=(0.0, 10.0)).run()
    topo = NodeTopology.simple([4 * n_gpus], n_gpus=n_gpus)
    backend = NodeBackend(topology=topo, _gpu_standin=True, pin=False)
    par = InterRDF(ow, ow, nbins=50, range=(0.0, 10.0)).run(backend=backend)
    np.testing.assert_array_equal(par.results.count_uint64, ser.results.count_uint64)
    run = backend.last_run
    assert [w["kind"] for w in run["workers"]] == ["gpu"] * n_gpus
    assert len(run["readers"]) == 4 * n_gpus - n_gpus
    assert run["part_sizes"] == guided_sizes(len(adk_water.trajectory), n_gpus)
    assert sum(w["frames"] for w in run["workers"]) >= len(adk_water.trajectory)
