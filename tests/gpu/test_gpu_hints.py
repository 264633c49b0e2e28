"""What a build without CUDA kernels, or a machine without a driver, tells the user (issue 38).

* A build without CUDA kernels (the default where no GPU is visible at build time) on a
  machine that has an NVIDIA GPU says once, when ``device='auto'`` is resolved, how to build
  the GPU kernels.
* A CUDA build on a machine without any NVIDIA driver says "no NVIDIA driver found", not
  CUDA's "driver version is insufficient".
"""

import fnmatch
import json
import os
import subprocess
import sys
import warnings

import pytest

from mdakit_fastrdf.engine import cuda as engine  # (the CUDA probe and its state)
from mdakit_fastrdf.engine import Engine, kspace

_INSUFFICIENT = ("cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA "
                 "runtime version)")


class _NoDeviceCuda:
    """A CUDA module that finds no device: CUDA's `error`, and `driver` as
    ``cudaDriverGetVersion`` (0: no driver installed)."""

    architectures = "90-real"

    def __init__(self, error, driver):
        self.error, self.driver = error, driver

    def device_count(self):
        return 0

    def device_error(self):
        return self.error

    def driver_version(self):
        return self.driver


@pytest.fixture
def cpu_build(monkeypatch):
    """A build without CUDA kernels, whose hint was not given yet in this process; returns a
    function that sets the GPU device file this machine seems to have (or None)."""
    monkeypatch.setattr(engine, "_cuda_module", lambda: None)
    monkeypatch.setattr(engine, "_gpu_hint_given", False)

    def machine_with(gpu):
        monkeypatch.setattr(engine, "visible_nvidia_gpu", lambda: gpu)

    return machine_with


def _resolve_auto_three_times():
    """Resolve device='auto' on a CPU-only build: two Engines and a KSpaceEngine; the
    devices and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        devices = [Engine("auto")._resolve(None, None), Engine("auto")._resolve(None, None),
                   kspace.KSpaceEngine("auto")._resolve()]
    return devices, [w for w in caught if "CUDA kernels" in str(w.message)]


def test_cpu_build_on_a_gpu_machine_says_once_how_to_get_the_gpu_kernels(cpu_build):
    cpu_build("/dev/nvidia0")
    devices, hints = _resolve_auto_three_times()
    assert devices == ["cpu", "cpu", "cpu"]
    assert len(hints) == 1, [str(w.message) for w in hints]
    text = str(hints[0].message)
    assert hints[0].category is UserWarning
    assert "/dev/nvidia0" in text and "device='auto' runs on the CPU" in text
    assert "python -m pip install . -C cmake.define.FASTRDF_CUDA=ON" in text


def test_cpu_build_without_a_gpu_says_nothing(cpu_build):
    cpu_build(None)
    devices, hints = _resolve_auto_three_times()
    assert devices == ["cpu", "cpu", "cpu"] and hints == []


def test_cpu_device_and_cuda_builds_give_no_hint(cpu_build, monkeypatch):
    """The hint is about device='auto' on a CPU-only build: not for device='cpu', nor for a
    CUDA build (which says why it cannot use the GPU when asked for 'cuda')."""
    cpu_build("/dev/nvidia0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Engine("cpu")._resolve(None, None) == "cpu"
        monkeypatch.setattr(engine, "_cuda_module", lambda: _NoDeviceCuda("", 12040))
        assert Engine("auto")._resolve([0, 10], [(0, 0)]) == "cpu"  # a small frame
    assert engine._gpu_hint_given is False


@pytest.mark.parametrize("visible, expected", [
    (None, "/dev/nvidia0"), ("0", "/dev/nvidia0"), ("GPU-5f2e", "/dev/nvidia0"),
    ("", None), ("-1", None), (" ", None),
])
def test_visible_nvidia_gpu(monkeypatch, visible, expected):
    """The GPU device files (not nvidiactl, nvidia-uvm), unless CUDA_VISIBLE_DEVICES hides
    every GPU."""
    files = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia1", "/dev/nvidia0"]
    monkeypatch.setattr(engine.glob, "glob",
                        lambda pattern: [f for f in files if fnmatch.fnmatch(f, pattern)])
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert engine.visible_nvidia_gpu() == expected


def test_visible_nvidia_gpu_without_device_files(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(engine.glob, "glob", lambda pattern: [])
    assert engine.visible_nvidia_gpu() is None


@pytest.fixture
def fake_cuda(monkeypatch):
    """Install a CUDA module that finds no device (fresh CUDA state of this process)."""
    def install(error, driver):
        monkeypatch.setattr(engine, "_cuda_module", lambda: _NoDeviceCuda(error, driver))
    monkeypatch.setattr(engine, "_cuda_pid", None)
    monkeypatch.setattr(engine, "_cuda_unusable", None)
    return install


def test_no_driver_at_all_is_named(fake_cuda):
    fake_cuda(_INSUFFICIENT, driver=0)  # cudaDriverGetVersion: 0, no driver installed
    why = engine.cuda_unavailable_reason()
    assert why.startswith("no usable CUDA device (no NVIDIA driver found: CUDA says "
                          "cudaErrorInsufficientDriver"), why
    assert "install the NVIDIA driver" in why and "update" not in why
    with pytest.raises(RuntimeError, match="no NVIDIA driver found"):
        Engine("cuda")._resolve(None, None)


def test_a_driver_too_old_keeps_cudas_words(fake_cuda):
    fake_cuda(_INSUFFICIENT, driver=11080)  # a driver for CUDA 11.8 under a CUDA 13 runtime
    why = engine.cuda_unavailable_reason()
    assert "no NVIDIA driver found" not in why
    assert _INSUFFICIENT in why and "install or update the NVIDIA driver" in why


@pytest.mark.slow  # a new interpreter
def test_no_driver_with_this_build(tmp_path):
    """The build installed here, where it has CUDA kernels and the machine no NVIDIA driver:
    the real runtime's error becomes "no NVIDIA driver found". In a subprocess: asking CUDA
    loads the driver's library where there is one, which the test process must not."""
    code = ("import json; from mdakit_fastrdf import engine as e; m = e._cuda_module(); "
            "print(json.dumps(None if m is None else "
            "[m.driver_version(), e.cuda_unavailable_reason()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if found is None:
        pytest.skip("this build has no CUDA kernels")
    driver, why = found
    if driver != 0:
        pytest.skip("this machine has an NVIDIA driver")
    assert why.startswith("no usable CUDA device (no NVIDIA driver found"), why
