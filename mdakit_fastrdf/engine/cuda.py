"""The CUDA probe and start: whether this build has CUDA kernels, whether a GPU can be used in
this process (and why not, with the fix), the driver's early start of a GPU worker, and the
``device`` option checked.

Nothing here initialises CUDA on import. The module's state (the process that initialised
CUDA, why no device is usable, the early start's thread) lives here only: code reads it
through this module (``cuda._cuda_pid``), and tests patch it here.
"""

from __future__ import annotations

import glob
import os
import threading
import time
import warnings

__all__ = ["cuda_devices", "cuda_start_span", "cuda_unavailable_reason",
           "cuda_used_in_this_process", "start_cuda_early", "validate_device",
           "visible_nvidia_gpu"]

_NOT_PROBED = object()
_cuda_probe = _NOT_PROBED  # the module, or None; importing nothing initialises CUDA


def _cuda_module():
    """The compiled CUDA module, or None when this build has no CUDA kernels (probed once
    per process: a failing import costs ~40 µs, every run of ``device='auto'`` asks)."""
    global _cuda_probe
    if _cuda_probe is _NOT_PROBED:
        try:
            from . import _fastrdf_cuda as module
        except ImportError:
            module = None
        _cuda_probe = module
    return _cuda_probe


def _cuda_fast_rule() -> bool:
    """Whether the CUDA module has the approximate-root kernels (FASTRDF_CUDA_FAST_RULE)."""
    return bool(getattr(_cuda_module(), "fast_rule", False))


# The process that initialised CUDA. A child forked from it inherits this value and must not
# touch CUDA (the driver cannot be used across fork): device='auto' then runs on the CPU and
# device='cuda' raises an error that says so.
_cuda_pid = None
# Why that process found no usable CUDA device: a child forked from it gives this cause (no
# driver, no device, ...), which the child would also meet, rather than the fork.
_cuda_unusable = None


def _cuda_init():
    """The CUDA module, noting that this process initialises CUDA; raises RuntimeError in a
    child forked after its parent initialised CUDA."""
    global _cuda_pid
    if _cuda_pid is not None and _cuda_pid != os.getpid():
        raise RuntimeError(
            "CUDA was initialised in the parent process before it forked this worker, and "
            "cannot be used here; start GPU workers with the 'spawn' or 'forkserver' method"
        )
    _cuda_pid = os.getpid()
    if _early_start is not None:
        # the driver started by start_cuda_early, in its turn: not a second start beside it
        _early_start.join()
    return _cuda_module()


#: ``[start, end]`` (``time.time()``) of :func:`start_cuda_early`'s driver start in this
#: process, once it has ended (for traces)
cuda_start_span: list = []


#: the thread of :func:`start_cuda_early` in this process (the engine waits for it before
#: its own first CUDA call)
_early_start = None


def _start_lock_path() -> str:
    """The file whose lock GPU workers of this user take in turn to start the driver."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f".mdakit-fastrdf-cuda-start-{uid}.lock")


def _taking_turns(start, patience=10.0):
    """Run `start` holding an exclusive lock on :func:`_start_lock_path` (where ``fcntl``
    exists and the file can be opened; else at once). A lock still held by another
    process after `patience` seconds (one stuck in its driver's start) is not waited for."""
    try:
        import fcntl

        fd = os.open(_start_lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):
        return start()
    try:
        deadline = time.monotonic() + patience
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.002)
            except OSError:
                break
        return start()
    finally:
        os.close(fd)  # (the lock goes with the descriptor)


def start_cuda_early():
    """Start the NVIDIA driver and the first visible GPU's primary context in a background
    thread, for a GPU worker that will soon make an engine: the driver's start (~0.4 s on
    an H200) then overlaps what the worker does before its first frame (receiving and
    unpickling the analysis) instead of following it. The calls go through ``ctypes`` to
    ``libcuda``, which releases the GIL, so the worker's own thread runs meanwhile; the
    engine waits for the thread before its own first CUDA call.

    The GPU workers of a node take turns (a lock on a file of this user's in the temporary
    directory): the driver serialises the starts of several processes anyway, so that two
    starting at once are both ready after twice the time of one (2x H200: 0.69-0.76 s each,
    against 0.37-0.43 s alone, benchmarks/NOTES.md); in turn the first is ready after one
    start and the GPUs' mean wait falls. Returns the thread, or None where there is no
    driver library (the engine then says why, as it would have)."""
    global _cuda_pid, _early_start
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if _cuda_pid is not None and _cuda_pid != os.getpid():
        return None  # (a child forked after CUDA started: the engine raises its error)
    _cuda_pid = os.getpid()

    def start():
        t0 = time.time()
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if lib.cuInit(0) == 0 and lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # kept for the process
        cuda_start_span[:] = [t0, time.time()]

    t = threading.Thread(target=_taking_turns, args=(start,), name="mdakit-fastrdf-cuda-start",
                         daemon=True)
    t.start()
    _early_start = t
    return t


def cuda_used_in_this_process() -> bool:
    """Whether CUDA may have been initialised in this process: by this package (or in a
    parent that forked it), or by anything else that loaded the NVIDIA driver's library
    (``libcuda``, e.g. another GPU package). A process for which this is False can fork GPU
    workers; without ``/proc/self/maps`` (not Linux) the answer is True."""
    if _cuda_pid is not None:
        return True
    try:
        with open("/proc/self/maps") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return True


def cuda_devices() -> list:
    """The CUDA devices this process can use (empty without a CUDA build, driver or GPU).

    Each entry is a dict with ``index``, ``name``, ``compute_capability``, ``total_memory``
    (bytes), ``multiprocessors``, ``shared_per_block_optin``, ``shared_per_multiprocessor`` and
    ``l2_bytes``. This initialises CUDA in the calling process: a process that will later
    fork GPU workers should not call it (use the ``spawn`` or ``forkserver`` start method).
    """
    if _cuda_module() is None:
        return []
    m = _cuda_init()
    if m.device_count() == 0:
        return []
    return [dict(d) for d in m.devices()]


# How to get the CUDA kernels into a build without them (a build on a machine without a GPU
# has none unless asked for: CMakeLists.txt, FASTRDF_CUDA)
_CUDA_REINSTALL = "python -m pip install . -C cmake.define.FASTRDF_CUDA=ON"


def visible_nvidia_gpu() -> str | None:
    """The device file of an NVIDIA GPU of this machine (``/dev/nvidia0``, ...), or None.

    None too when ``CUDA_VISIBLE_DEVICES`` hides every GPU (empty, or ``-1``). Loads no
    driver library and initialises nothing, so a process may fork GPU workers after it
    (``libcuda`` in a process would make :func:`cuda_used_in_this_process` true).
    """
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        return None
    nodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
    return nodes[0] if nodes else None


_gpu_hint_given = False


def _hint_cuda_build() -> None:
    """Warn, once per process, that this build without CUDA kernels runs ``device='auto'``
    on the CPU although the machine has an NVIDIA GPU, and how to build the GPU kernels."""
    global _gpu_hint_given
    if _gpu_hint_given:
        return
    _gpu_hint_given = True
    gpu = visible_nvidia_gpu()
    if gpu is None:
        return
    warnings.warn(
        f"this machine has an NVIDIA GPU ({gpu}), but this build of mdakit_fastrdf has no "
        "CUDA kernels (built where no GPU was visible, or without nvcc), so device='auto' "
        "runs on the CPU. For the GPU kernels, reinstall from the source directory with the "
        f"CUDA toolkit: {_CUDA_REINSTALL} (docs/installation.rst, 'CUDA build').",
        UserWarning, stacklevel=2)


def _no_driver(module, error: str) -> bool:
    """Whether CUDA's `error` means that there is no NVIDIA driver at all: the runtime says
    cudaErrorInsufficientDriver (a driver older than the runtime) for that too, and then
    ``cudaDriverGetVersion`` gives 0."""
    if "cudaErrorInsufficientDriver" not in error:
        return False
    try:
        return int(module.driver_version()) == 0
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False


def _cuda_fix(error: str) -> str:
    """What to do about `error`, the reason CUDA gave for finding no device."""
    fixes = (
        (("no NVIDIA driver found",),
         ("install the NVIDIA driver (nvidia-smi must list the GPUs), or run on a machine "
          "(or a job allocation) with an NVIDIA GPU")),
        (("cudaErrorInsufficientDriver", "cudaErrorStubLibrary", "cudaErrorSystemDriverMismatch",
          "cudaErrorCompatNotSupportedOnDevice", "cudaErrorInitializationError"),
         ("install or update the NVIDIA driver (nvidia-smi must list the GPUs, and the "
          "driver must support the CUDA version of this build)")),
        (("cudaErrorMemoryAllocation",),
         ("the GPU is out of memory: end the processes that hold it (nvidia-smi lists "
          "them) or use another GPU")),
        (("cudaErrorDevicesUnavailable",),
         ("the GPUs are busy (exclusive-process mode) or unavailable: wait for the "
          "processes that use them (nvidia-smi) or use another GPU")),
        (("cudaErrorNoDevice", "no CUDA device found"),
         ("run on a machine (or a job allocation) with an NVIDIA GPU, and check that "
          "CUDA_VISIBLE_DEVICES does not hide it (nvidia-smi lists the GPUs)")),
    )
    for names, fix in fixes:
        if any(name in error for name in names):
            return fix
    return "check the NVIDIA driver and the GPUs with nvidia-smi"


def cuda_unavailable_reason() -> str | None:
    """Why no CUDA device can be used here and what to do about it, or None when one can
    (initialises CUDA)."""
    global _cuda_unusable
    if _cuda_module() is None:
        return ("this build of mdakit_fastrdf has no CUDA kernels (build_info()['cuda'] is "
                f"False); reinstall it with nvcc: {_CUDA_REINSTALL}, see the installation "
                "docs")
    try:
        m = _cuda_init()
    except RuntimeError as exc:  # forked after the parent initialised CUDA
        return _cuda_unusable or str(exc)
    if m.device_count() == 0:
        error = m.device_error()
        if _no_driver(m, error):
            error = f"no NVIDIA driver found: CUDA says {error}"
        _cuda_unusable = f"no usable CUDA device ({error}); {_cuda_fix(error)}"
        return _cuda_unusable
    _cuda_unusable = None
    return None


def validate_device(device) -> str:
    """Check ``device`` ('auto', 'cpu', 'cuda' or 'cuda:N') and return it normalised.

    Asking for CUDA from a build without CUDA kernels is a ValueError here; whether a GPU is
    present is checked when the first frame runs (in the worker process), so that no CUDA
    state is created in a parent process that forks workers.
    """
    if not isinstance(device, str):
        raise TypeError(f"device must be a string ('auto', 'cpu', 'cuda' or 'cuda:N'), got {device!r}")
    d = device.strip().lower()
    if d in ("auto", "cpu"):
        return d
    if d == "cuda" or d.startswith("cuda:"):
        index = d[5:] if d.startswith("cuda:") else "0"
        if not index.isdigit():
            raise ValueError(f"device={device!r}: write 'cuda' or 'cuda:N' with N a GPU index (0, 1, ...)")
        if _cuda_module() is None:
            raise ValueError(
                f"device={device!r}: this build of mdakit_fastrdf has no CUDA kernels "
                f"(build_info()['cuda'] is False; reinstall it with nvcc: {_CUDA_REINSTALL}, "
                "see the installation docs); use device='cpu' or device='auto'"
            )
        return f"cuda:{int(index)}"
    raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
