"""GPU workers start the NVIDIA driver in turn (engine.cuda.start_cuda_early): the lock they take,
and the engine waiting for the early start. No GPU needed: the start is a stand-in."""

import os
import threading
import time

from mdakit_fastrdf.engine import cuda as engine  # (the CUDA start and its state)


def test_starts_take_turns(tmp_path, monkeypatch):
    """Two starts at once run one after the other (a lock on a file per user)."""
    monkeypatch.setattr(engine, "_start_lock_path", lambda: str(tmp_path / "start.lock"))
    spans = []

    def start():
        t0 = time.monotonic()
        time.sleep(0.15)
        spans.append((t0, time.monotonic()))

    threads = [threading.Thread(target=engine._taking_turns, args=(start,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (a0, a1), (b0, b1) = sorted(spans)
    assert b0 >= a1 - 1e-3  # the second began once the first had ended


def test_a_lock_held_too_long_is_not_waited_for(tmp_path, monkeypatch):
    """A lock held by a stuck process: the start goes ahead after `patience` seconds."""
    import fcntl

    path = str(tmp_path / "start.lock")
    monkeypatch.setattr(engine, "_start_lock_path", lambda: path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        t0 = time.monotonic()
        ran = engine._taking_turns(lambda: time.monotonic(), patience=0.2)
        assert 0.2 <= ran - t0 < 5.0
    finally:
        os.close(fd)


def test_the_engine_waits_for_the_early_start(monkeypatch):
    """The engine's first CUDA call (_cuda_init) follows the early start's end, so that it
    does not start the driver a second time beside it."""
    done = []
    early = threading.Thread(target=lambda: (time.sleep(0.2), done.append(True)))
    monkeypatch.setattr(engine, "_early_start", early)
    monkeypatch.setattr(engine, "_cuda_pid", None)
    early.start()
    engine._cuda_init()
    assert done == [True]
