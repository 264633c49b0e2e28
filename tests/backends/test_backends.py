"""Parallel backends: the node backend, dask with a distributed client, and the failure rules.

Every backend must give *identical* integer counts for every analysis class of the package
(``ANALYSES`` below: add new classes there). GPU workers are simulated by CPU stand-ins:
spawned workers bound to made-up devices ``cuda:0``, ``cuda:1`` whose engines run on the CPU.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from conftest import datafile, make_universe, random_positions_in_box, requires_gpu

from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF
from mdakit_fastrdf.engine import (
    Engine, WorkerPlacement, placed_device, set_worker_placement, worker_placement,
)
from mdakit_fastrdf.backends.topology import (
    CpuGroup, NodeTopology, count_gpus, detect_topology, parse_cpulist,
)
from mdakit_fastrdf.backends import (
    DaskDistributedBackend, NodeBackend, WorkerDiedError, plan_workers,
)

# -- the analysis classes ------------------------------------------------------------------
# Each entry builds an analysis of a Universe; all must give the same counts on every backend.


def _interrdf(u, **kw):
    ow = u.select_atoms("name OW") if "OW" in set(u.atoms.names) else u.atoms
    ow = ow[:600]
    norm = "rdf" if u.dimensions is not None else "density"  # PSF/DCD has no box
    return InterRDF(ow, ow, nbins=60, range=(0.0, 12.0), exclusion_block=(1, 1), norm=norm,
                    **kw)


def _interrdf_s(u, **kw):
    kw.pop("device", None)  # CPU only
    ow = u.select_atoms("name OW") if "OW" in set(u.atoms.names) else u.atoms
    norm = "rdf" if u.dimensions is not None else "density"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # MDAnalysis's `u` argument
        return InterRDF_s(u, [[ow[:20], ow[20:50]], [ow[50:60], ow[50:60]]], nbins=40,
                          range=(0.0, 10.0), norm=norm, **kw)


def _species(u, **kw):
    norm = "rdf" if u.dimensions is not None else "density"
    return SpeciesRDF(u.atoms[:700], by="name", nbins=50, range=(0.0, 10.0), norm=norm, **kw)


ANALYSES = [
    pytest.param(_interrdf, id="InterRDF"),
    pytest.param(_interrdf_s, id="InterRDF_s"),
    pytest.param(_species, id="SpeciesRDF"),
]


def _counts(analysis):
    """The exact integer results of an analysis: every ``*_uint64`` array, else ``count``
    (InterRDF_s: a list of float64 arrays of integer counts)."""
    out = {k: np.asarray(v) for k, v in analysis.results.items() if k.endswith("uint64")}
    if not out:
        c = analysis.results.count
        out = ({f"count[{i}]": np.asarray(x) for i, x in enumerate(c)} if isinstance(c, list)
               else {"count": np.asarray(c)})
    return out


def _assert_identical(par, ser):
    a, b = _counts(par), _counts(ser)
    assert a.keys() == b.keys() and a
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    np.testing.assert_array_equal(par.frames, ser.frames)
    assert par.n_frames == ser.n_frames


def _machine_groups():
    return detect_topology().groups


def _standin_backend(**kw):
    """Two GPU workers (spawned, bound to cuda:0 and cuda:1) whose engines run on the CPU."""
    topo = NodeTopology(_machine_groups(), n_gpus=2, source="test", gpu_source="stand-ins")
    kw.setdefault("cpu_workers", 0)  # GPU workers only, whatever the cores of this machine
    kw.setdefault("gpu_start_method", "spawn")  # as after the caller has used CUDA
    return NodeBackend(gpus=[0, 1], topology=topo, _gpu_standin=True, **kw)


# -- identical counts on every backend ------------------------------------------------------


@pytest.mark.parametrize("make", ANALYSES)
def test_node_backend_identical_to_serial(adk_water, make):
    """backend='node' (2 CPU workers here, many small parts) = serial, bit for bit."""
    ser = make(adk_water).run()
    par = make(adk_water).run(backend="node", n_workers=2)
    _assert_identical(par, ser)


@pytest.mark.parametrize("make", ANALYSES)
def test_all_backends_identical_on_dcd(adk_vacuum, make):
    """serial, multiprocessing, node (object, parts of 3 frames) on PSF/DCD frames 0..29."""
    ser = make(adk_vacuum).run(stop=30)
    mp = make(adk_vacuum).run(stop=30, backend="multiprocessing", n_workers=2)
    backend = NodeBackend(cpu_workers=2, part_frames=3)
    node = make(adk_vacuum).run(stop=30, backend=backend)
    _assert_identical(mp, ser)
    _assert_identical(node, ser)
    run = backend.last_run
    assert run["n_parts"] == 10 and run["n_frames"] == 30
    assert sum(w["frames"] for w in run["workers"]) >= 30
    assert sum(w["parts"] for w in run["workers"]) >= 10  # parts taken from the queue


@pytest.mark.parametrize("make", ANALYSES)
def test_gpu_standin_workers(adk_water, make):
    """GPU workers start with spawn, each bound to its own device and pinned to its own
    core; device='auto' maps to the worker's device (here a CPU stand-in)."""
    if make(adk_water)._plan_device() == "cpu":
        pytest.skip("this class runs on the CPU only: the backend plans no GPU workers for it")
    ser = make(adk_water).run(step=2)
    backend = _standin_backend()
    par = make(adk_water).run(step=2, backend=backend)
    _assert_identical(par, ser)
    workers = backend.last_run["workers"]
    assert [w["device"] for w in workers] == ["cuda:0", "cuda:1"]
    assert {w["kind"] for w in workers} == {"gpu"}
    # stand-ins: planned as GPU workers, their engines really ran on the CPU, and say so
    assert all(w["devices_used"] in ([], ["cpu"]) for w in workers)
    assert any(w["devices_used"] == ["cpu"] for w in workers)
    assert {w["start_method"] for w in workers} == {"spawn"}
    # a worker that was still starting when the other had done every part reports nothing
    started = [w for w in workers if w["pid"] is not None]
    assert started and sum(w["frames"] for w in started) >= 5
    if len(os.sched_getaffinity(0)) >= 2:
        # each pinned to CPUs of its own, as many as its threads (fed GPU workers: 1 or 2)
        assert all(len(w["cpus"]) == w["n_threads"] for w in started)
        cpus = [c for w in started for c in w["cpus"]]
        assert len(cpus) == len(set(cpus))
    assert [s.cpus for s in backend.specs][0] != [s.cpus for s in backend.specs][1]


@requires_gpu
@pytest.mark.parametrize("make", ANALYSES)
def test_node_backend_on_real_gpus(adk_water, make):
    """On a GPU machine: one spawned worker per GPU, each on its own device; single
    precision on the GPU equals the CPU bit for bit."""
    if make(adk_water)._plan_device() == "cpu":
        pytest.skip("this class runs on the CPU only: the backend plans no GPU workers for it")
    ser = make(adk_water, device="cpu").run()
    backend = NodeBackend(gpu_start_method="spawn")
    par = make(adk_water, device="cuda").run(backend=backend)
    _assert_identical(par, ser)
    workers = [w for w in backend.last_run["workers"] if w["kind"] == "gpu"]
    assert workers and all(w["start_method"] == "spawn" for w in workers)
    assert len({w["device"] for w in workers}) == len(workers)
    # each GPU worker's engine really ran on the device it was planned for
    for w in workers:
        if w["parts"]:
            assert w["devices_used"] == [w["device"]], w
    for w in backend.last_run["workers"]:
        if w["kind"] == "cpu" and w["parts"]:
            assert w["devices_used"] == ["cpu"], w
    if getattr(par, "device", "auto") != "auto":  # device='cuda': GPU workers only
        assert len(workers) == len(backend.last_run["workers"])


@pytest.mark.parametrize("which", ["cpu", "gpu-standin"])
def test_forkserver_workers(adk_water, which):
    """Workers started by a fork server (start_method / gpu_start_method='forkserver'): their
    parent is the server, not the caller, and they run (they used to exit at start-up when
    they found a parent other than the caller); identical counts."""
    if which == "cpu":
        backend = NodeBackend(gpus=None, cpu_workers=2, start_method="forkserver")
    else:
        backend = _standin_backend(gpu_start_method="forkserver")
    ser = _interrdf(adk_water).run(step=3)
    par = _interrdf(adk_water).run(step=3, backend=backend)
    _assert_identical(par, ser)
    assert {w["start_method"] for w in backend.last_run["workers"]} == {"forkserver"}


def test_hybrid_standin_gpu_and_cpu_worker(adk_water):
    """One GPU worker (stand-in, spawned) beside a CPU worker (forked) on the other core:
    eight parts per worker, identical counts (readers=0: the default plan gives the free
    cores to readers instead, test_feed.py)."""
    groups = _machine_groups()
    if sum(len(g.cpus) for g in groups) < 2:
        pytest.skip("needs two cores")
    topo = NodeTopology(groups, n_gpus=1, source="test", gpu_source="stand-in")
    backend = NodeBackend(topology=topo, _gpu_standin=True, readers=0,
                          gpu_start_method="spawn")
    assert [s.kind for s in backend.specs][:2] == ["gpu", "cpu"]
    assert backend.parts_for(100) == 8 * backend.n_workers
    ser = _interrdf(adk_water).run()
    par = _interrdf(adk_water).run(backend=backend)
    _assert_identical(par, ser)
    assert {w["start_method"] for w in backend.last_run["workers"]} >= {"spawn", "fork"}


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policies")
def test_hybrid_fed_cpu_workers_run_at_idle_priority(adk_water):
    """A hybrid plan with readers: the CPU workers share the readers' cores at idle
    priority (SCHED_IDLE, seen from outside their processes while the warm engine holds
    them), the GPU worker and readers at the normal one; counts identical to serial."""
    groups = _machine_groups()
    if sum(len(g.cpus) for g in groups) < 2:
        pytest.skip("needs two cores")
    topo = NodeTopology(groups, n_gpus=1, source="test", gpu_source="stand-in")
    ser = _interrdf(adk_water).run(step=4)
    with NodeBackend(topology=topo, _gpu_standin=True, hybrid=True, cpu_workers=1,
                     gpu_start_method="spawn") as node:
        assert [s.kind for s in node.plan("auto")].count("reader") >= 1
        assert [s.kind for s in node.specs] == ["gpu", "cpu"] and node.specs[1].idle
        par = _interrdf(adk_water).run(step=4, backend=node)
        _assert_identical(par, ser)
        # (a CPU worker still starting on a loaded machine, with no part of this short
        # run, sets its own policy as it starts: wait for it)
        wanted = {"gpu": os.SCHED_OTHER, "cpu": os.SCHED_IDLE}
        deadline = time.monotonic() + 20.0
        while True:
            try:
                policy = {w["kind"]: os.sched_getscheduler(w["process"])
                          for w in node.last_run["workers"]}
            except ProcessLookupError:  # (ended: it did not start before the run's end)
                pytest.skip("the machine is too loaded: the CPU worker did not start within "
                            "the run")
            if policy == wanted or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        ahead = {w["kind"]: w["lookahead"] for w in node.last_run["workers"]}
        readers = {os.sched_getscheduler(r["pid"]) for r in node.last_run["readers"]}
    # the readers read ahead for the GPU worker as if it were alone (the same plan
    # without CPU workers); the CPU worker beside it reads two frames ahead
    alone = NodeBackend(topology=topo, _gpu_standin=True, gpu_start_method="spawn")
    _interrdf(adk_water).run(step=4, backend=alone)
    assert ahead == {"gpu": alone.last_run["workers"][0]["lookahead"], "cpu": 2}
    assert len(alone.last_run["readers"]) == len(node.last_run["readers"])
    assert policy == wanted
    assert readers == {os.SCHED_OTHER}


def test_frame_selection_and_progress_bar(adk_water, capsys):
    """frames=[...] selects the same frames; verbose=True draws one bar over frames in
    the caller."""
    ow = adk_water.select_atoms("name OW")[:400]
    ser = InterRDF(ow, ow).run(frames=[0, 3, 4, 8])
    par = InterRDF(ow, ow).run(frames=[0, 3, 4, 8], backend="node", n_workers=2, verbose=True)
    _assert_identical(par, ser)
    err = capsys.readouterr().err
    assert "4/4" in err


def test_supported_backends_listed():
    assert "node" in InterRDF.get_supported_backends()


def test_n_workers_twice_is_an_error(adk_water):
    ow = adk_water.select_atoms("name OW")[:100]
    with pytest.raises(ValueError, match="n_workers specified twice"):
        # (gpus=None: on a 2-GPU machine the plan would be 2 GPU + 1 CPU = 3 workers)
        InterRDF(ow, ow).run(backend=NodeBackend(gpus=None, cpu_workers=1), n_workers=3)


# -- failures ------------------------------------------------------------------------------


class RaisingRDF(InterRDF):
    """Raises on a given frame (in a worker and in serial alike)."""

    raise_on = 3

    def _single_frame(self):
        if self._ts.frame == self.raise_on:
            raise ValueError(f"boom at frame {self._ts.frame}")
        super()._single_frame()


class KillingRDF(InterRDF):
    """Kills its own process with SIGKILL on a given frame, but only in a backend worker."""

    kill_on = 4

    def _single_frame(self):
        if self._ts.frame == self.kill_on and worker_placement() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        super()._single_frame()


class KilledInProgressLockRDF(InterRDF):
    """In a backend worker, takes the progress bars' lock and is killed holding it."""

    def _single_frame(self):
        if worker_placement() is not None:
            from MDAnalysis.lib.log import ProgressBar

            ProgressBar.get_lock().acquire()
            os.kill(os.getpid(), signal.SIGKILL)
        super()._single_frame()


class SlowFirstWorkerRDF(InterRDF):
    """Worker rank 0 takes 2 s per frame: a straggler for the duplication rule."""

    def _single_frame(self):
        p = worker_placement()
        if p is not None and p.rank == 0:
            time.sleep(2.0)
        super()._single_frame()


@pytest.mark.parametrize("standin", [False, True], ids=["fork-cpu", "spawn-gpu-standin"])
def test_worker_exception_surfaces(adk_water, standin):
    """The worker's exception is raised in the caller, promptly, with the worker's
    traceback as its cause and a note naming the worker and its frames."""
    ow = adk_water.select_atoms("name OW")[:300]
    backend = _standin_backend() if standin else NodeBackend(cpu_workers=2)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="boom at frame 3") as info:
        RaisingRDF(ow, ow).run(backend=backend)
    assert time.perf_counter() - t0 < 30
    cause = str(info.value.__cause__)
    assert "_single_frame" in cause and "boom at frame 3" in cause
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "node backend worker" in notes and "frames" in notes
    assert all(w["pid"] is None or not _alive(w["pid"]) for w in backend.last_run["workers"])


@pytest.mark.parametrize("start", ["fork-cpu", "forkserver-cpu", "spawn-gpu-standin"])
def test_killed_worker_ends_the_run(adk_water, start):
    """A worker killed with SIGKILL ends the run at once with WorkerDiedError (no hang, no
    partial result) and the other workers are stopped: forked CPU workers, CPU workers from
    a fork server, and spawned GPU workers (stand-ins, the start method of real GPU
    workers)."""
    ow = adk_water.select_atoms("name OW")[:300]
    if start == "spawn-gpu-standin":
        backend = _standin_backend(part_frames=1)
    else:
        backend = NodeBackend(gpus=None, cpu_workers=2, part_frames=1,
                              start_method=start.split("-")[0])
    a = KillingRDF(ow, ow)
    t0 = time.perf_counter()
    with pytest.raises(WorkerDiedError, match=r"SIGKILL.*frames 4\.\.4"):
        a.run(backend=backend)
    assert time.perf_counter() - t0 < 30
    assert "count" not in a.results
    assert all(not _alive(w["pid"]) for w in backend.last_run["workers"] if w["pid"])
    assert {w["start_method"] for w in backend.last_run["workers"]} == {start.split("-")[0]}


def test_worker_killed_holding_the_progress_lock(adk_water):
    """A worker killed while it holds the progress bars' lock (which tqdm keeps in a
    multiprocessing semaphore that forked processes share) must not leave the caller's
    next progress bar waiting for ever: each worker takes a lock of its own. The caller's
    lock exists before the workers start (its own earlier bars), as in a real session."""
    from MDAnalysis.lib.log import ProgressBar

    ow = adk_water.select_atoms("name OW")[:200]
    InterRDF(ow, ow).run(stop=1)  # the caller's bars and their lock exist before the fork
    backend = NodeBackend(gpus=None, cpu_workers=2, part_frames=1, start_method="fork")
    with pytest.raises(WorkerDiedError):
        KilledInProgressLockRDF(ow, ow).run(stop=4, backend=backend)
    lock = ProgressBar.get_lock()
    for part in getattr(lock, "locks", [lock]):  # tqdm's lock: a process and a thread lock
        assert part.acquire(timeout=10), "the progress bars' lock was left taken by a dead worker"
        part.release()
    InterRDF(ow, ow).run(stop=1)  # and a bar can be made again


def test_straggler_part_is_recomputed(mem_universe):
    """A worker much slower than another does not hold back the end: its part is
    recomputed by the idle fast worker and the first copy counts."""
    g = mem_universe.atoms
    ser = InterRDF(g, g).run()
    backend = NodeBackend(gpus=None, cpu_workers=2, part_frames=1)  # CPU workers only
    t0 = time.perf_counter()
    par = SlowFirstWorkerRDF(g, g).run(backend=backend)
    _assert_identical(par, ser)
    run = backend.last_run
    assert run["duplicates_started"] >= 1 and run["duplicates_won"] >= 1, run
    slow = [w for w in run["workers"] if w["rank"] == 0][0]
    assert slow["frames"] <= 1
    assert time.perf_counter() - t0 < 20


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            state = [line for line in f if line.startswith("State:")][0]
        return "Z" not in state.split()[1]
    except (OSError, IndexError):
        return False


@pytest.mark.slow  # a script in a new interpreter
def test_ctrl_c_stops_every_worker(tmp_path):
    """SIGINT to the caller during a node run: KeyboardInterrupt in the caller and every
    worker process ends."""
    datafile("TPR", "XTC")  # skips where the data files were not carried
    script = textwrap.dedent(f"""
        import os, time
        import MDAnalysis as mda
        from MDAnalysisTests.datafiles import TPR, XTC
        from mdakit_fastrdf import InterRDF, InterRDF_s, SpeciesRDF

        class SleepyRDF(InterRDF):
            def _prepare(self):
                super()._prepare()
                open(os.path.join({str(tmp_path)!r}, f"pid-{{os.getpid()}}"), "w").close()
            def _single_frame(self):
                # long frames: the run is still going when the signal comes, however late
                # the test sees the second worker on a loaded machine
                time.sleep(2.0)
                super()._single_frame()

        if __name__ == "__main__":
            ow = mda.Universe(TPR, XTC).select_atoms("name OW")[:200]
            # (on the CPU: beside a GPU the scheduler may leave a CPU worker no part)
            SleepyRDF(ow, ow, device="cpu").run(backend="node", n_workers=2)
            print("FINISHED")
    """)
    path = tmp_path / "ctrlc.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # Ctrl-C as a terminal's user has it: SIGINT at its default in the script (a test run
    # started in the background by a non-interactive shell inherits SIGINT ignored, and a
    # Python started so installs no KeyboardInterrupt handler)
    proc = subprocess.Popen([sys.executable, str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("pid-*"))) < 2 and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    pids = [int(p.name[4:]) for p in tmp_path.glob("pid-*")]
    assert len(pids) >= 2, proc.communicate(timeout=30)
    assert proc.poll() is None, "the run ended before the signal could be sent"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err and "FINISHED" not in out, err
    time.sleep(0.5)
    assert not [p for p in pids if _alive(p)]


# -- a script without `if __name__ == "__main__":`, workers dying while they start --------

_SCRIPT_HEAD = """
    import os, sys
    import MDAnalysis as mda
    from MDAnalysisTests.datafiles import TPR, XTC
    from mdakit_fastrdf import InterRDF
    from mdakit_fastrdf.backends import NodeBackend
    from mdakit_fastrdf.backends.topology import NodeTopology, detect_topology

    print("SCRIPT BODY", __name__, flush=True)
    backends = {
        "node": lambda: "node",
        "spawn": lambda: NodeBackend(gpus=None, cpu_workers=2, start_method="spawn"),
        "forkserver": lambda: NodeBackend(gpus=None, cpu_workers=2, start_method="forkserver"),
        "spawn-gpu-standin": lambda: NodeBackend(
            gpus=[0], cpu_workers=0, _gpu_standin=True, gpu_start_method="spawn",
            topology=NodeTopology(detect_topology().groups, n_gpus=1, source="test",
                                  gpu_source="stand-ins")),
    }
"""


def _run_script(tmp_path, body, *args, timeout=120):
    """Run a user script (`_SCRIPT_HEAD` + `body`) in a new interpreter; the result of
    :func:`subprocess.run` (a hang fails the test at `timeout` seconds)."""
    datafile("TPR", "XTC")  # skips where the data files were not carried
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(_SCRIPT_HEAD) + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        return subprocess.run([sys.executable, str(path), *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the script hung ({timeout} s): {exc.stdout}\n{exc.stderr}")


_UNGUARDED = """
    ow = mda.Universe(TPR, XTC).select_atoms("name OW")[:200]
    rdf = InterRDF(ow, ow, nbins=20, range=(0.0, 8.0)).run(backend=backends[sys.argv[1]]())
    print("FINISHED", int(rdf.results.count.sum()), flush=True)
"""


@pytest.mark.slow  # a script in a new interpreter
@pytest.mark.parametrize("backend", ["node", "spawn", "forkserver", "spawn-gpu-standin"])
def test_script_without_main_guard(tmp_path, backend):
    """A script that calls run(backend='node') at its top level, without
    `if __name__ == "__main__":`: workers that fork run it; workers that would import the
    script again (spawn, forkserver: GPU workers always) are refused within seconds, before
    any starts, by an error naming the guard, and the script never runs twice."""
    if backend == "node":
        # what a new interpreter plans (GPU workers fork there while nothing has used CUDA;
        # this test process may have used it)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        probe = subprocess.run(
            [sys.executable, "-c", "from mdakit_fastrdf.backends import NodeBackend; "
             "print(any(s.start_method != 'fork' for s in NodeBackend().specs))"],
            cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
        rerun = probe.stdout.strip().splitlines()[-1] == "True"
    else:
        rerun = True
    t0 = time.perf_counter()
    out = _run_script(tmp_path, _UNGUARDED, backend)
    assert out.stdout.count("SCRIPT BODY") == 1, out.stdout + out.stderr
    if not rerun:
        assert out.returncode == 0 and "FINISHED" in out.stdout, out.stderr
        return
    assert out.returncode != 0 and "FINISHED" not in out.stdout
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: The node backend starts worker processes"), out.stderr
    assert "if __name__ == \"__main__\":" in last and "user_script.py" in last
    assert "('rdf = InterRDF(ow, ow" in last and "No worker was started" in last
    assert ("start_method='fork'" in last) is (backend in ("spawn", "forkserver"))
    assert time.perf_counter() - t0 < 60


@pytest.mark.slow  # a script in a new interpreter
def test_script_with_main_guard_runs_spawned_workers(tmp_path):
    """The same script with its work under the guard runs on spawned workers."""
    body = ("def main():\n" + textwrap.indent(textwrap.dedent(_UNGUARDED), "    ")
            + 'if __name__ == "__main__":\n    main()\n')
    out = _run_script(tmp_path, body, "spawn")
    assert out.returncode == 0 and "FINISHED" in out.stdout, out.stderr
    assert out.stdout.count("SCRIPT BODY __mp_main__") == 2  # imported by each worker


@pytest.mark.slow  # a script in a new interpreter
@pytest.mark.parametrize("backend", ["spawn", "spawn-gpu-standin", "forkserver"])
def test_worker_dying_while_starting_ends_the_run(tmp_path, backend):
    """A worker that dies before its first part (here: the script exits when a worker
    imports it) ends the run at once with WorkerDiedError, even though the analysis it was
    to receive is larger than a pipe's buffer (Python's own hand-over would wait for ever)."""
    out = _run_script(tmp_path, """
        if __name__ == "__mp_main__":
            sys.exit(3)

        if __name__ == "__main__":
            u = mda.Universe(TPR, XTC)  # a large analysis to send: the whole Universe
            InterRDF(u.atoms[:200], u.atoms[:200]).run(backend=backends[sys.argv[1]]())
            print("FINISHED", flush=True)
    """, backend, timeout=90)
    assert out.returncode != 0 and "FINISHED" not in out.stdout
    last = out.stderr.strip().splitlines()[-1]
    # a fork server's child exits with code 1 whatever ends it while it starts
    code = "1" if backend == "forkserver" else "3"
    assert "WorkerDiedError" in last and f"exited with code {code} while starting" in last, \
        out.stderr


def test_main_guard_detection():
    from mdakit_fastrdf.backends.main_guard import _guarded, _main_rerun_by_spawn

    src = textwrap.dedent("""
        import x
        run()
        if __name__ == "__main__":
            run()
        else:
            run()
        def f():
            if "__main__" == __name__:
                run()
        if __name__ != "__main__":
            run()
    """)
    assert [_guarded(src, line) for line in (3, 5, 7, 10, 12)] == [
        False, True, False, True, False]
    assert _guarded("def (", 1) is None

    class Main:
        __spec__ = None

    m = Main()
    assert not _main_rerun_by_spawn(m)  # python -c, an interactive session
    m.__file__ = "/home/me/script.py"
    assert _main_rerun_by_spawn(m)
    m.__file__ = "/usr/bin/ipython"
    assert not _main_rerun_by_spawn(m)
    m.__spec__ = type("Spec", (), {"name": "pytest.__main__"})()
    assert not _main_rerun_by_spawn(m)  # python -m pytest: a __main__.py is not run again
    m.__spec__.name = "mypackage.job"
    assert _main_rerun_by_spawn(m)


# -- device='cuda' where no GPU can be used: the real cause and its fix ----------------------


class _NoDeviceCuda:
    """A CUDA module that finds no device, for the reason `error` (as ``device_error()``)."""

    KERNELS = ("auto", "shared", "packed", "global")
    architectures = "90-real"

    def __init__(self, error):
        self.error = error

    def device_count(self):
        return 0

    def device_error(self):
        return self.error


@pytest.fixture
def fake_cuda(monkeypatch):
    """Install a CUDA module that finds no device (fresh CUDA state of this process)."""
    from mdakit_fastrdf.engine import cuda as engine

    def install(error):
        monkeypatch.setattr(engine, "_cuda_module", lambda: _NoDeviceCuda(error))
        return engine

    monkeypatch.setattr(engine, "_cuda_pid", None)
    monkeypatch.setattr(engine, "_cuda_unusable", None, raising=False)
    return install


_CUDA_CAUSES = [
    ("cudaErrorNoDevice (no CUDA-capable device is detected)", "CUDA_VISIBLE_DEVICES"),
    (("cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime "
      "version)"), "install or update the NVIDIA driver"),
    ("cudaErrorStubLibrary (CUDA driver is a stub library)", "install or update the NVIDIA driver"),
    ("cudaErrorMemoryAllocation (out of memory)", "the GPU is out of memory"),
    ("cudaErrorUnknown (unknown error)", "nvidia-smi"),
]


@pytest.mark.parametrize("error, fix", _CUDA_CAUSES, ids=lambda v: v.split(" ")[0])
def test_cuda_unusable_names_the_cause_and_fix(fake_cuda, small_periodic_universe, error, fix):
    """device='cuda' without a usable GPU: the error gives CUDA's reason and what to do,
    and nothing about forking (this process never forked)."""
    fake_cuda(error)
    ag = small_periodic_universe.atoms
    with pytest.raises(RuntimeError) as info:
        InterRDF(ag, ag, device="cuda").run(stop=1)
    text = str(info.value)
    assert text.startswith("device='cuda:0' was asked for, but no usable CUDA device (")
    assert error in text and fix in text and "device='cpu'" in text
    assert "fork" not in text


def test_cuda_unusable_in_a_forked_worker_names_the_cause(fake_cuda, small_periodic_universe):
    """The caller found no usable GPU (which initialised CUDA here), then forked workers
    with device='cuda': they report that cause, not the fork."""
    engine = fake_cuda("cudaErrorInsufficientDriver (CUDA driver version is insufficient)")
    assert "NVIDIA driver" in engine.cuda_unavailable_reason()
    assert engine._cuda_pid == os.getpid()
    ag = small_periodic_universe.atoms
    with pytest.raises(RuntimeError, match="cudaErrorInsufficientDriver") as info:
        InterRDF(ag, ag, device="cuda").run(backend="multiprocessing", n_workers=2)
    assert "install or update the NVIDIA driver" in str(info.value)
    assert "fork" not in str(info.value)


def test_cuda_after_a_fork_from_a_cuda_process(fake_cuda, monkeypatch):
    """A child forked from a process that did use a GPU: the fork is the cause, and the
    start methods that avoid it are the fix."""
    engine = fake_cuda("")
    monkeypatch.setattr(engine, "_cuda_pid", os.getpid() + 1)  # the parent's
    why = engine.cuda_unavailable_reason()
    assert "before it forked this worker" in why and "'spawn' or 'forkserver'" in why
    with pytest.raises(RuntimeError, match="before it forked this worker"):
        Engine("cuda")._resolve(None, None)


def test_cuda_without_a_cuda_build(monkeypatch):
    from mdakit_fastrdf.engine import cuda as engine

    monkeypatch.setattr(engine, "_cuda_module", lambda: None)
    why = engine.cuda_unavailable_reason()
    assert "has no CUDA kernels" in why and "nvcc" in why and "fork" not in why
    with pytest.raises(ValueError, match="no CUDA kernels.*device='cpu'"):
        Engine("cuda")


# -- dask with a distributed client ---------------------------------------------------------


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.parametrize("make", ANALYSES)
def test_dask_client_identical(adk_water, dask_client, make):
    """backend='dask' with an active distributed client runs on the client's workers and
    gives the serial counts; so does an explicit DaskDistributedBackend."""
    from mdakit_fastrdf.backends import _resolve_backend

    assert isinstance(_resolve_backend("dask", None), DaskDistributedBackend)
    ser = make(adk_water).run()
    par = make(adk_water).run(backend="dask")
    _assert_identical(par, ser)
    par2 = make(adk_water).run(backend=DaskDistributedBackend(dask_client, threads_per_worker=1))
    _assert_identical(par2, ser)


@pytest.fixture(scope="module")
def dask_node_client():
    """Two dask workers that may start processes (not daemonic): node engines."""
    distributed = pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.worker.daemon": False}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                           processes=True, dashboard_address=None)
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.mark.parametrize("make", ANALYSES[:3])
def test_dask_node_engines_identical(adk_water, dask_node_client, make):
    """Each dask task a block of parts run by the dask worker's node engine (kept warm
    between tasks): the serial counts, with the node engine's workers in each dask
    worker (one block per worker here, then two)."""
    ser = make(adk_water).run()
    for blocks in (1, 2):
        b = DaskDistributedBackend(dask_node_client, blocks_per_worker=blocks,
                                   node_options={"gpus": None, "cpu_workers": 1})
        assert b.engine == "node"
        par = make(adk_water).run(backend=b)
        _assert_identical(par, ser)
    # the node engines stay in the dask workers, warm, between runs
    pids = dask_node_client.run(_node_engine_pids)
    assert all(p for p in pids.values()), pids


def test_dask_node_engines_keep_the_universe(adk_water, dask_node_client):
    """A dask run with node engines sends the node payload (the Universe apart): a dask
    worker that ran the same Universe before loads it from those it kept, unpickling
    nothing, and its node engine takes the same bytes; the counts stay the serial ones."""
    ser = _interrdf(adk_water).run()
    b = DaskDistributedBackend(dask_node_client, node_options={"gpus": None, "cpu_workers": 1})
    ran = []
    for _ in range(2):
        dask_node_client.run(_mark_payload_load)  # (a worker given no block keeps the mark)
        par = _interrdf(adk_water).run(backend=b)
        _assert_identical(par, ser)
        loads = dask_node_client.run(_last_payload_load)
        ran.append({w: v for w, v in loads.items() if v["kept"] >= 0})
    both = set(ran[0]) & set(ran[1])  # the dask workers that ran a block in both runs
    assert both, ran
    assert all(ran[1][w] == {"kept": 1, "unpickled": 0} for w in both), ran


def _mark_payload_load():
    from mdakit_fastrdf.backends import payload

    payload.last_load.update(kept=-1, unpickled=-1)


def _last_payload_load():
    from mdakit_fastrdf.backends import payload

    return dict(payload.last_load)


def _node_engine_pids():
    from mdakit_fastrdf.backends.dask_backend import _dask_nodes

    return [w.pid for node, _ in _dask_nodes.values() for w in node._pool.workers]


def test_dask_daemonic_workers_run_parts_and_say_how_to_get_node_engines(dask_client):
    with pytest.warns(RuntimeWarning, match="distributed.worker.daemon"):
        b = DaskDistributedBackend(dask_client)
    assert b.engine == "parts"
    b = DaskDistributedBackend(dask_client, engine="parts")  # chosen: no warning
    with pytest.raises(ValueError, match="engine must be"):
        DaskDistributedBackend(dask_client, engine="gpu")
    with pytest.raises(ValueError, match="leave topology out"):
        DaskDistributedBackend(dask_client, engine="parts", node_options={"topology": 1})


def test_dask_client_progress_bar(adk_water, dask_client, capsys):
    ow = adk_water.select_atoms("name OW")[:200]
    InterRDF(ow, ow).run(backend="dask", verbose=True)
    assert "10/10" in capsys.readouterr().err


def test_dask_client_worker_exception(adk_water, dask_client):
    ow = adk_water.select_atoms("name OW")[:200]
    with pytest.raises(ValueError, match="boom at frame 3"):
        RaisingRDF(ow, ow).run(backend="dask")


# -- planning, topology, binding (no processes) ---------------------------------------------


def test_plan_laptop():
    """A laptop: one socket of 8 cores, no GPU -> 2 CPU workers x 4 threads."""
    specs = plan_workers(NodeTopology.simple([8]))
    assert [(s.kind, s.n_threads, len(s.cpus)) for s in specs] == [("cpu", 4, 4)] * 2
    assert set(specs[0].cpus).isdisjoint(specs[1].cpus)


def test_plan_two_socket_node():
    """2 sockets x 32 cores, no GPU -> 2 CPU workers per socket, 16 threads each, each
    inside its socket."""
    specs = plan_workers(NodeTopology.simple([32, 32]))
    assert len(specs) == 4 and all(s.kind == "cpu" and s.n_threads == 16 for s in specs)
    assert all(max(s.cpus) < 32 or min(s.cpus) >= 32 for s in specs)


def test_plan_four_gpu_node():
    """2 sockets x 32 cores, 4 GPUs -> 4 GPU workers (spawn, one core each, two per socket)
    and (readers=0) CPU workers on the 30 remaining cores of each socket; by default the
    60 free cores read for the GPUs instead (test_feed.py)."""
    readers = plan_workers(NodeTopology.simple([32, 32], n_gpus=4))
    assert [s.kind for s in readers] == ["gpu"] * 4 + ["reader"] * 56
    assert [len(s.cpus) for s in readers[:4]] == [2] * 4
    specs = plan_workers(NodeTopology.simple([32, 32], n_gpus=4), readers=0,
                         gpu_start_method="spawn")
    gpu = [s for s in specs if s.kind == "gpu"]
    cpu = [s for s in specs if s.kind == "cpu"]
    assert [s.device for s in gpu] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert all(len(s.cpus) == 1 and s.n_threads == 1 and s.start_method == "spawn" for s in gpu)
    assert sorted(c < 32 for s in gpu for c in s.cpus) == [False, False, True, True]
    assert len(cpu) == 4 and sum(s.n_threads for s in cpu) == 60
    used = [c for s in specs for c in s.cpus]
    assert len(used) == len(set(used)) == 64
    no_hybrid = plan_workers(NodeTopology.simple([32, 32], n_gpus=4), hybrid=False)
    assert [s.kind for s in no_hybrid if s.kind != "reader"] == ["gpu"] * 4  # (readers read)
    only_gpu = plan_workers(NodeTopology.simple([32, 32], n_gpus=4), device="cuda:0")
    assert [s.kind for s in only_gpu if s.kind != "reader"] == ["gpu"] * 4
    cpu_only = plan_workers(NodeTopology.simple([32, 32], n_gpus=4), device="cpu")
    assert [s.kind for s in cpu_only] == ["cpu"] * 4
    two = plan_workers(NodeTopology.simple([32, 32], n_gpus=4), gpus=[1, 3], cpu_workers=2)
    assert [s.device for s in two if s.kind != "reader"] == ["cuda:1", "cuda:3", "cpu", "cpu"]


def test_plan_hybrid_keeps_the_readers():
    """CPU workers beside GPU workers (hybrid=True, cpu_workers=N) share the readers' cores
    at idle priority: every free core still reads for the GPUs (a hybrid plan without
    readers left the GPU workers reading their own frames, 2.5x slower than GPUs alone on
    a 2-GPU node; CPU workers on cores taken from the readers gave 0.90-0.96x with XTC)."""
    topo = NodeTopology.simple([16, 16], n_gpus=2)
    alone = plan_workers(topo)
    n_readers = sum(s.kind == "reader" for s in alone)
    gpu_cpus = {c for s in alone if s.kind == "gpu" for c in s.cpus}
    for kw, n_cpu in (({"hybrid": True}, 4), ({"cpu_workers": 2}, 2),
                      ({"hybrid": True, "cpu_workers": 6}, 6)):
        plan = plan_workers(topo, **kw)
        cpu = [s for s in plan if s.kind == "cpu"]
        readers = [s for s in plan if s.kind == "reader"]
        assert len(cpu) == n_cpu and all(s.idle for s in cpu), kw
        assert not any(s.idle for s in plan if s.kind != "cpu"), kw
        assert len(readers) == n_readers, kw
        reader_cpus = [c for s in readers for c in s.cpus]
        assert len(reader_cpus) == len(set(reader_cpus)) == 32 - len(gpu_cpus), kw
        cpu_cpus = [c for s in cpu for c in s.cpus]
        # the CPU workers together share every reader's core, each its own block, and
        # none a GPU worker's
        assert sorted(cpu_cpus) == sorted(reader_cpus), kw
        assert not gpu_cpus & set(cpu_cpus), kw
        assert [s.n_threads for s in cpu] == [len(s.cpus) for s in cpu], kw
        assert "idle priority" in cpu[0].describe()
    # readers=0 keeps the old hybrid plan: the CPU workers take every free core
    plan = plan_workers(topo, hybrid=True, readers=0)
    assert not any(s.kind == "reader" for s in plan)
    assert sum(s.n_threads for s in plan if s.kind == "cpu") == 30  # (GPU workers: 1 core)


def test_plan_smt_threads_per_physical_core():
    """Hyperthread siblings count as one core: one thread per physical core, pinned to
    both siblings."""
    cores = tuple((c, c + 4) for c in range(4))
    topo = NodeTopology((CpuGroup("node0", tuple(range(8)), cores),))
    specs = plan_workers(topo, cpu_workers=1)
    assert specs[0].n_threads == 4 and sorted(specs[0].cpus) == list(range(8))


def test_plan_n_workers_caps():
    specs = plan_workers(NodeTopology.simple([4, 4], n_gpus=2), n_workers=3)
    assert [s.kind for s in specs] == ["gpu", "gpu", "cpu"]


@pytest.mark.parametrize("kw, exc, match", [
    (dict(gpus=5), ValueError, "gpus=5.*sees 2 GPU"),
    (dict(gpus=[0, 7]), ValueError, "no GPU 7"),
    (dict(gpus=[0, 0]), ValueError, "once"),
    (dict(gpus="all"), ValueError, "gpus must be"),
    (dict(gpus=1.5), TypeError, "gpus must be"),
    (dict(cpu_workers=-1), ValueError, "cpu_workers must be >= 0"),
    (dict(cpu_workers="many"), TypeError, "cpu_workers must be 'auto' or an integer"),
    (dict(cpu_workers=99), ValueError, "cpu_workers=99.*free"),
    (dict(threads_per_worker=0), ValueError, "threads_per_worker must be >= 1"),
    (dict(hybrid="yes"), TypeError, "hybrid must be"),
    (dict(start_method="thread"), ValueError, "start_method must be"),
    (dict(gpu_start_method="fork"), ValueError, "gpu_start_method.*fork"),
    (dict(gpu_start_method="thread"), ValueError, "gpu_start_method must be 'auto'"),
    (dict(device="cuda:0", hybrid=True), ValueError, "hybrid=True"),
    (dict(device="cpu", gpus=[0]), ValueError, "device='cpu'"),
    (dict(n_workers=3, cpu_workers=4), ValueError, "n_workers=3"),
])
def test_plan_bad_options(kw, exc, match):
    with pytest.raises(exc, match=match):
        plan_workers(NodeTopology.simple([4, 4], n_gpus=2), **kw)


def test_bad_backend_options():
    with pytest.raises(ValueError, match="part_frames must be >= 1"):
        NodeBackend(part_frames=0)
    with pytest.raises(TypeError, match="topology must be"):
        NodeBackend(topology="big")
    with pytest.raises(TypeError, match="pin must be"):
        NodeBackend(pin="yes")
    with pytest.raises(ValueError, match="device='cuda:0' needs GPU workers"):
        plan_workers(NodeTopology.simple([2]), device="cuda:0")
    with pytest.raises(ValueError, match="hybrid=False leaves no workers"):
        plan_workers(NodeTopology.simple([2]), hybrid=False)


def test_dask_backend_without_client():
    pytest.importorskip("distributed")
    from mdakit_fastrdf.backends import _default_client

    if _default_client() is not None:
        pytest.skip("a dask client is active")
    with pytest.raises(ValueError, match="no dask.distributed Client"):
        DaskDistributedBackend()


def test_parse_cpulist():
    assert parse_cpulist("0-3,8-9,12") == [0, 1, 2, 3, 8, 9, 12]
    assert parse_cpulist("") == []


def test_topology_from_fake_sysfs(tmp_path):
    """Two NUMA nodes of 4 logical cpus (2 cores x 2 hyperthreads) read from a fake
    /sys tree; the process's allowed cpus filter them."""
    sysfs = tmp_path / "sys"
    for node, cpulist in (("node0", "0-1,4-5"), ("node1", "2-3,6-7")):
        (sysfs / "node" / node).mkdir(parents=True)
        (sysfs / "node" / node / "cpulist").write_text(cpulist + "\n")
    for c in range(8):
        topo = sysfs / "cpu" / f"cpu{c}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(str((c // 2) % 2))
        (topo / "core_id").write_text(str(c % 2))
    t = detect_topology(str(sysfs), proc_root=str(tmp_path), environ={}, allowed=range(8))
    assert t.source == "numa" and [g.cpus for g in t.groups] == [(0, 1, 4, 5), (2, 3, 6, 7)]
    assert [g.n_cores for g in t.groups] == [2, 2]
    t = detect_topology(str(sysfs), proc_root=str(tmp_path), environ={}, allowed=[0, 1, 2])
    assert [g.cpus for g in t.groups] == [(0, 1), (2,)]
    # no NUMA directory: sockets from physical_package_id
    import shutil

    shutil.rmtree(sysfs / "node")
    t = detect_topology(str(sysfs), proc_root=str(tmp_path), environ={}, allowed=range(8))
    assert t.source == "sockets" and [g.cpus for g in t.groups] == [(0, 1, 4, 5), (2, 3, 6, 7)]


def test_count_gpus_without_cuda(tmp_path):
    assert count_gpus({"CUDA_VISIBLE_DEVICES": "0,1,-1,3"}, str(tmp_path)) == (2, "CUDA_VISIBLE_DEVICES")
    assert count_gpus({"CUDA_VISIBLE_DEVICES": ""}, str(tmp_path))[0] == 0
    gpus = tmp_path / "driver" / "nvidia" / "gpus"
    for bus in ("0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"):
        (gpus / bus).mkdir(parents=True)
    assert count_gpus({}, str(tmp_path), use_nvidia_smi=False) == (4, "/proc/driver/nvidia/gpus")


def test_placed_device_mapping():
    gpu1 = WorkerPlacement(device="cuda:1", n_threads=1, kind="gpu")
    cpu = WorkerPlacement(device="cpu", n_threads=3)
    assert placed_device("auto", None) == "auto"
    assert placed_device("auto", gpu1) == "auto:1"
    assert placed_device("cuda:0", gpu1) == "cuda:1"
    assert placed_device("cpu", gpu1) == "cpu"
    assert placed_device("auto", cpu) == "cpu"
    assert placed_device("auto", WorkerPlacement(device=None)) == "auto"


def test_worker_engines_share_compiled_state():
    """In a worker, engines reuse the compiled implementation of earlier parts and take
    the worker's thread count; outside a worker nothing is shared."""
    offsets = np.array([0, 20], dtype=np.int64)
    pairs = np.array([[0, 0]], dtype=np.int32)
    try:
        set_worker_placement(WorkerPlacement(device="cpu", n_threads=1))
        a, b = Engine("auto"), Engine("auto")
        ia, ib = a._make_impl(offsets, pairs), b._make_impl(offsets, pairs)
        assert ia is ib and ia.n_threads == 1 and a.device_used == "cpu"
    finally:
        set_worker_placement(None)
    assert Engine("cpu")._make_impl(offsets, pairs) is not Engine("cpu")._make_impl(offsets, pairs)


@pytest.fixture(scope="module")
def mem_universe():
    rng = np.random.default_rng(5)
    n_frames, n = 6, 240
    dims = np.array([[22.0 + 0.2 * f, 23.0, 24.0, 90.0, 90.0, 90.0] for f in range(n_frames)])
    coords = np.stack([random_positions_in_box(rng, n, dims[f])[0] for f in range(n_frames)])
    return make_universe(coords, dims, atoms_per_residue=3)


def test_gpu_workers_fork_until_cuda_is_used(monkeypatch):
    """gpu_start_method='auto': GPU workers fork (no new interpreter, no main guard) while
    this process has not used CUDA, and are spawned once it has (or once anything loaded
    the driver's libcuda)."""
    import mdakit_fastrdf.engine.cuda as engine

    topo = NodeTopology.simple([8], n_gpus=2)
    monkeypatch.setattr(engine, "cuda_used_in_this_process", lambda: False)
    assert {s.start_method for s in plan_workers(topo) if s.kind == "gpu"} == {"fork"}
    monkeypatch.setattr(engine, "cuda_used_in_this_process", lambda: True)
    assert {s.start_method for s in plan_workers(topo) if s.kind == "gpu"} == {"spawn"}
    assert {s.start_method for s in plan_workers(topo, gpu_start_method="forkserver")
            if s.kind == "gpu"} == {"forkserver"}


def test_cuda_used_in_this_process(monkeypatch):
    import mdakit_fastrdf.engine.cuda as engine

    monkeypatch.setattr(engine, "_cuda_pid", os.getpid())
    assert engine.cuda_used_in_this_process()
    monkeypatch.setattr(engine, "_cuda_pid", None)
    loaded = any("libcuda.so" in line for line in open("/proc/self/maps"))
    assert engine.cuda_used_in_this_process() is loaded
    # a child forked after the parent initialised CUDA counts as having used it
    monkeypatch.setattr(engine, "_cuda_pid", os.getpid() + 1)
    assert engine.cuda_used_in_this_process()
