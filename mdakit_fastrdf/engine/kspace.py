r"""Direct k-space sums: the amplitudes :math:`A_a(\mathbf{k})` of the reciprocal lattice vectors
of a periodic box, compiled for the CPU and for CUDA GPUs.

A periodic box with vectors :math:`\mathbf{a}, \mathbf{b}, \mathbf{c}` (the rows of
:math:`B`) admits the wave vectors

.. math::

    \mathbf{k}_\mathbf{n} = 2\pi\,(n_1 \mathbf{a}^* + n_2 \mathbf{b}^* + n_3 \mathbf{c}^*),
    \qquad \mathbf{a}^*\cdot\mathbf{a} = 1,\ \mathbf{a}^*\cdot\mathbf{b} = 0, \dots

(the rows of :math:`B^{-T}`), with integer :math:`\mathbf{n}`. For the atoms :math:`j` of a
species :math:`a`,

.. math::

    A_a(\mathbf{k}) = \sum_{j \in a} e^{i \mathbf{k}\cdot\mathbf{r}_j}
                    = \sum_{j \in a} \prod_{c=1}^{3} e^{2\pi i\, n_c s_{jc}},
    \qquad \mathbf{s}_j = \mathbf{r}_j B^{-1},

and the partial structure factors are
:math:`S_{ab}(\mathbf{k}) = \operatorname{Re}(A_a A_b^*) / \sqrt{N_a N_b}`. Because
:math:`A(-\mathbf{k}) = A(\mathbf{k})^*`, :func:`reciprocal_vectors` lists one vector of each
pair :math:`\pm\mathbf{k}`.

The kernels compute the phases in double precision from the fractional coordinates, group the
vectors by :math:`(n_1, n_2)` and take :math:`\pm n_3` from the same four real sums; the cost is
:math:`O(N M)` multiply-adds for :math:`N` atoms and :math:`M` vectors (docs/design.rst,
"Direct k-space sum", derives it and the error bound: :math:`|A - A_\text{exact}|` stays below
:math:`10^{-12}\sqrt{N}`). The result does not depend on the number of CPU threads (bit for
bit); the GPU agrees with the CPU to :data:`GPU_TOLERANCE`.

Examples
--------
>>> import numpy as np
>>> from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors
>>> box = np.diag([20.0, 20.0, 20.0])
>>> n, q = reciprocal_vectors(box, q_max=1.0)
>>> n[:3], np.round(q[:3], 4)  # doctest: +NORMALIZE_WHITESPACE
(array([[0, 0, 1], [0, 1, 0], [1, 0, 0]], dtype=int32), array([0.3142, 0.3142, 0.3142]))
>>> rng = np.random.default_rng(0)
>>> positions = rng.random((100, 3)) * 20.0
>>> amp = KSpaceEngine(device="cpu").amplitudes(positions, [0, 100], box, n)
>>> amp.shape, amp.dtype
((1, 73), dtype('complex128'))
"""

from __future__ import annotations

import numbers
import os
import threading
from collections import deque

import numpy as np

from . import (
    _cpu_module,
    cuda,
    resolve_device,
    validate_device,
    validate_n_threads,
    worker_placement,
)

__all__ = ["FRAMES_IN_FLIGHT", "GPU_TOLERANCE", "AmplitudesInFlight", "KSpaceEngine",
           "reciprocal_vectors", "wave_vectors"]

#: The GPU's amplitudes agree with the CPU's within ``GPU_TOLERANCE * sqrt(N_a)`` (absolute,
#: per vector; both are within ``1e-12 sqrt(N_a)`` of the exact sum). They are not bitwise
#: equal: the GPU takes every table entry from ``sincospi`` and adds the atoms in another
#: (fixed) order.
GPU_TOLERANCE = 1e-12

#: Frames in flight at most in an :class:`AmplitudesInFlight` by default.
FRAMES_IN_FLIGHT = 8


def _check_box(box_vectors) -> np.ndarray:
    try:
        box = np.array(box_vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"box_vectors must be a (3, 3) array of numbers, got {box_vectors!r}") from exc
    if box.shape != (3, 3):
        raise ValueError(
            f"box_vectors must be the (3, 3) box vectors (rows a, b, c, in Å), got shape "
            f"{box.shape}; from MDAnalysis dimensions use "
            "MDAnalysis.lib.mdamath.triclinic_vectors(ts.dimensions)")
    if not np.all(np.isfinite(box)):
        raise ValueError(f"box_vectors must be finite, got {box_vectors!r}")
    lengths = np.linalg.norm(box, axis=1)
    det = float(np.linalg.det(box))
    if not abs(det) > 1e-12 * float(np.prod(lengths)):
        raise ValueError(
            "box_vectors: the box has zero volume (its vectors are zero or linearly "
            f"dependent: {box.tolist()}); the k-space sum needs a periodic cell")
    return box


def _check_positive(name, value, *, allow_zero=False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number (Å⁻¹), got {value!r}")
    v = float(value)
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'} (Å⁻¹), got {value!r}")
    return v


def wave_vectors(box_vectors, n) -> np.ndarray:
    r"""The wave vectors :math:`\mathbf{k} = 2\pi\, \mathbf{n} B^{-T}` (Å⁻¹, float64 (M, 3)) of
    the integer indices ``n`` (M, 3) in the box ``box_vectors`` (rows a, b, c, Å).

    Examples
    --------
    >>> import numpy as np
    >>> from mdakit_fastrdf.engine.kspace import wave_vectors
    >>> np.round(wave_vectors(np.diag([10.0, 20.0, 40.0]), [[1, 1, 1]]), 4)
    array([[0.6283, 0.3142, 0.1571]])
    """
    box = _check_box(box_vectors)
    n = np.asarray(n)
    if n.ndim != 2 or n.shape[1] != 3:
        raise ValueError(f"n must be an (M, 3) array of integer indices, got shape {n.shape}")
    return 2.0 * np.pi * n.astype(np.float64) @ np.linalg.inv(box).T


def reciprocal_vectors(box_vectors, q_max, q_min=0.0) -> tuple[np.ndarray, np.ndarray]:
    r"""The reciprocal lattice vectors of a periodic box with :math:`q_\min < |\mathbf{k}| \le
    q_\max`, one of each pair :math:`\pm\mathbf{k}`.

    Parameters
    ----------
    box_vectors : array_like, (3, 3)
        Box vectors as rows :math:`\mathbf{a}, \mathbf{b}, \mathbf{c}` (Å), orthorhombic or
        triclinic (``MDAnalysis.lib.mdamath.triclinic_vectors(ts.dimensions)``).
    q_max : float
        Largest :math:`|\mathbf{k}|` (Å⁻¹, included).
    q_min : float
        Smallest :math:`|\mathbf{k}|` (Å⁻¹, excluded; default 0, which leaves out
        :math:`\mathbf{k} = 0`).

    Returns
    -------
    n : numpy.ndarray, int32 (M, 3)
        Indices of :math:`\mathbf{k} = 2\pi (n_1 \mathbf{a}^* + n_2 \mathbf{b}^* + n_3
        \mathbf{c}^*)` in the half space :math:`n_1 > 0`, or :math:`n_1 = 0, n_2 > 0`, or
        :math:`n_1 = n_2 = 0, n_3 > 0`; sorted by :math:`|\mathbf{k}|`, ties by
        :math:`(n_1, n_2, n_3)`.
    q : numpy.ndarray, float64 (M,)
        :math:`|\mathbf{k}|` (Å⁻¹).

    Notes
    -----
    Every vector with :math:`|\mathbf{k}| \le q_\max` has
    :math:`|n_c| = |\mathbf{k}\cdot\mathbf{a}_c| / 2\pi \le q_\max |\mathbf{a}_c| / 2\pi`,
    so that box of indices is searched, one :math:`n_1` plane at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from mdakit_fastrdf.engine.kspace import reciprocal_vectors
    >>> n, q = reciprocal_vectors(np.diag([10.0, 10.0, 10.0]), q_max=0.9)
    >>> len(n)  # half of the 6 vectors of |k| = 2 pi / 10 and of the 12 of sqrt(2) times that
    9
    >>> q.round(4).tolist()
    [0.6283, 0.6283, 0.6283, 0.8886, 0.8886, 0.8886, 0.8886, 0.8886, 0.8886]
    """
    box = _check_box(box_vectors)
    q_max = _check_positive("q_max", q_max)
    q_min = _check_positive("q_min", q_min, allow_zero=True)
    if q_min >= q_max:
        raise ValueError(f"q_min must be smaller than q_max, got q_min={q_min} and q_max={q_max}")
    key = (box.tobytes(), q_max, q_min)
    cached = _last_vectors.get("entry")
    if cached is not None and cached[0] == key:  # the same box as the last call (constant volume)
        return cached[1].copy(), cached[2].copy()
    n, q = _enumerate_vectors(box, q_max, q_min)
    _last_vectors["entry"] = (key, n.copy(), q.copy())  # one assignment: safe across threads
    return n, q


_last_vectors: dict = {}


def _enumerate_vectors(box, q_max, q_min):
    recip = 2.0 * np.pi * np.linalg.inv(box).T  # rows: 2 pi a*, 2 pi b*, 2 pi c*
    bound = np.floor(q_max * np.linalg.norm(box, axis=1) / (2.0 * np.pi) + 1e-9).astype(np.int64)
    if np.prod(2 * bound + 1, dtype=np.float64) > 4e9:
        raise ValueError(
            f"q_max={q_max} Å⁻¹ spans {int(np.prod(2 * bound + 1, dtype=np.float64)):,} index "
            "triples in this box; the direct k-space sum is meant for small q (use the "
            "histogram route for large q), lower q_max")
    n2, n3 = np.meshgrid(np.arange(-bound[1], bound[1] + 1), np.arange(-bound[2], bound[2] + 1),
                         indexing="ij")
    n2 = n2.ravel()
    n3 = n3.ravel()
    chunks_n, chunks_q = [], []
    for n1 in range(int(bound[0]) + 1):
        keep = np.ones(n2.shape, bool)
        if n1 == 0:
            keep = (n2 > 0) | ((n2 == 0) & (n3 > 0))
        idx = np.stack([np.full(np.count_nonzero(keep), n1), n2[keep], n3[keep]], axis=1)
        k = idx.astype(np.float64) @ recip
        q = np.sqrt(np.einsum("ij,ij->i", k, k))
        sel = (q > q_min) & (q <= q_max)
        chunks_n.append(idx[sel])
        chunks_q.append(q[sel])
    n = np.concatenate(chunks_n).astype(np.int32) if chunks_n else np.empty((0, 3), np.int32)
    q = np.concatenate(chunks_q) if chunks_q else np.empty(0)
    order = np.lexsort((n[:, 2], n[:, 1], n[:, 0], q))
    return np.ascontiguousarray(n[order]), q[order]


def _check_offsets(offsets, n_atoms) -> np.ndarray:
    try:
        off = np.asarray(offsets)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"offsets must be a 1-d array of integers, got {offsets!r}") from exc
    if off.ndim != 1 or off.size < 2 or not np.issubdtype(off.dtype, np.integer):
        raise ValueError(
            "offsets must be a 1-d integer array [0, n_0, n_0 + n_1, ..., n_atoms] (species a "
            f"is positions[offsets[a]:offsets[a + 1]]), got {offsets!r}")
    off = off.astype(np.int64)
    if off[0] != 0 or off[-1] != n_atoms or np.any(np.diff(off) < 0):
        raise ValueError(
            f"offsets must rise from 0 to the number of positions ({n_atoms}) so that they "
            f"cover every atom once, got {off.tolist() if off.size < 20 else off}")
    return np.ascontiguousarray(off)


def _ready(a, dtypes, ndim) -> bool:
    """Whether `a` is already a C-contiguous array of one of `dtypes` with `ndim` axes."""
    return (isinstance(a, np.ndarray) and a.dtype in dtypes and a.ndim == ndim
            and a.flags.c_contiguous)


def _checked_arguments(positions, offsets, box_vectors, n):
    """The arguments of :meth:`KSpaceEngine.amplitudes` checked (errors that name the
    parameter) and converted to the compiled call's types."""
    pos = np.asarray(positions)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"positions must be an (N, 3) array (Å), got shape {pos.shape}")
    if pos.dtype not in (np.float32, np.float64):
        if not np.issubdtype(pos.dtype, np.number) or np.iscomplexobj(pos):
            raise TypeError(f"positions must be real numbers, got dtype {pos.dtype}")
        pos = pos.astype(np.float64)
    pos = np.ascontiguousarray(pos)
    off = _check_offsets(offsets, pos.shape[0])
    box = _check_box(box_vectors)
    nn = np.asarray(n)
    if nn.ndim != 2 or nn.shape[1] != 3 or not np.issubdtype(nn.dtype, np.integer):
        raise ValueError(
            f"n must be an (M, 3) integer array of reciprocal indices "
            f"(reciprocal_vectors), got {nn.dtype} of shape {nn.shape}")
    if nn.shape[0] == 0:
        raise ValueError(
            "n holds no k vectors (M = 0): q_max is below the smallest |k| of this box "
            "(2 pi / the longest box length); raise q_max")
    if np.abs(nn).max() > 2**20:
        raise ValueError("n: indices must lie within +-2**20")
    return pos, off, box, np.ascontiguousarray(nn, dtype=np.int32)


class KSpaceEngine:
    r"""Amplitudes :math:`A_a(\mathbf{k})` of species of atoms, on the CPU or a CUDA GPU.

    Parameters
    ----------
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}
        ``'auto'`` takes GPU 0 when this build has CUDA kernels and a GPU is usable in the
        process that computes, else the CPU; ``'cuda'`` without a usable GPU raises a
        RuntimeError naming the cause. In a worker of the package's node backend, the worker's
        device and threads are used.
    n_threads : int or None
        CPU threads (None: every core the process may use). The result does not depend on it.

    Notes
    -----
    Pickle-safe: the compiled (and CUDA) state is made on the first call, in the process that
    makes it, and is not pickled. CUDA is never initialised at import or construction.

    Examples
    --------
    >>> import numpy as np
    >>> from mdakit_fastrdf.engine.kspace import KSpaceEngine, reciprocal_vectors
    >>> box = np.diag([15.0, 15.0, 15.0])
    >>> n, q = reciprocal_vectors(box, q_max=1.2)
    >>> pos = np.random.default_rng(1).random((50, 3)) * 15.0
    >>> eng = KSpaceEngine(device="cpu", n_threads=1)
    >>> amp = eng.amplitudes(pos, [0, 20, 50], box, n)  # two species
    >>> s_11 = (amp[0] * amp[0].conj()).real / 20        # S_11(k) of every vector
    >>> bool(np.all(s_11 >= 0))
    True
    """

    def __init__(self, device="auto", n_threads=None):
        self.device = validate_device(device)
        self.n_threads = validate_n_threads(n_threads)
        self.device_used = None  # 'cpu' or 'cuda:N' after the first call
        self._impl = None
        self._pid = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_impl"] = None
        state["_pid"] = None
        state["device_used"] = None
        return state

    def _resolve(self) -> str:
        return resolve_device(self.device, worker_placement())

    def _make_impl(self):
        self.device_used = self._resolve()
        if self.device_used == "cpu":
            return None
        index = int(self.device_used.split(":")[1])
        m = cuda._cuda_init()
        count = m.device_count()
        if index >= count:
            raise ValueError(f"device={self.device!r}: there is no CUDA device {index} (found {count})")
        return m.KSpaceCuda(index)

    def amplitudes(self, positions, offsets, box_vectors, n) -> np.ndarray:
        r""":math:`A_a(\mathbf{k}_m) = \sum_{j \in a} \exp(i \mathbf{k}_m\cdot\mathbf{r}_j)`.

        Parameters
        ----------
        positions : array_like, (N, 3) float32 or float64
            Positions (Å); they need not be wrapped into the box.
        offsets : array_like of int, (n_species + 1,)
            Species :math:`a` is ``positions[offsets[a]:offsets[a + 1]]``.
        box_vectors : array_like, (3, 3)
            Box vectors as rows a, b, c (Å).
        n : array_like of int, (M, 3)
            Indices of the vectors (:func:`reciprocal_vectors`; any integers work, ``M >= 1``).

        Returns
        -------
        numpy.ndarray, complex128 (n_species, M)

        Examples
        --------
        >>> import numpy as np
        >>> from mdakit_fastrdf.engine.kspace import KSpaceEngine
        >>> box = np.diag([10.0, 10.0, 10.0])
        >>> amp = KSpaceEngine("cpu").amplitudes([[2.5, 0, 0]], [0, 1], box, [[1, 0, 0]])
        >>> np.round(amp, 12)  # exp(i 2 pi / 4)
        array([[0.+1.j]])
        """
        # Arrays already of the compiled call's types go to it as they are: it checks the
        # same things (shapes, ranges, finiteness, a zero volume) without a Python pass over
        # them each frame; where it refuses, the checks below name the problem.
        fast = (_ready(positions, (np.float32, np.float64), 2) and _ready(offsets, (np.int64,), 1)
                and _ready(box_vectors, (np.float64,), 2) and _ready(n, (np.int32,), 2))
        args = (positions, offsets, box_vectors, n) if fast else \
            _checked_arguments(positions, offsets, box_vectors, n)
        try:
            return self._compiled_amplitudes(*args)
        except ValueError:
            pos, *_ = _checked_arguments(positions, offsets, box_vectors, n)  # named errors
            if not np.all(np.isfinite(pos)):
                bad = np.flatnonzero(~np.all(np.isfinite(pos), axis=1))
                raise ValueError(
                    f"positions must be finite: {bad.size} atom(s) have NaN or infinite "
                    f"coordinates (first indices {bad[:5].tolist()})") from None
            raise

    def _compiled_amplitudes(self, pos, off, box, nn):
        if self._pid != os.getpid():  # first call, or a process forked after it
            self._impl = self._make_impl()
            self._pid = os.getpid()
        if self._impl is None:
            n_threads = self.n_threads
            placement = worker_placement()
            if n_threads is None and placement is not None:
                n_threads = placement.n_threads
            return _cpu_module().kspace_amplitudes(pos, off, box, nn, n_threads or 0, "")
        with self._lock:
            return self._impl.amplitudes(pos, off, box, nn)

    _lock = threading.Lock()


class AmplitudesInFlight:
    """Frames' amplitudes computed in a thread of their own while the caller reads the next
    frames, handed back in the order they were asked for.

    The compiled call releases the GIL for its work (the positions' conversion, the GPU's
    kernels and transfers), so a frame loop that reads with MDAnalysis and sums on a GPU
    overlaps the two: on one H200, IntermediateScattering's 500 frames of 16,000 atoms took
    0.52-0.68 s one after the other and 0.25 s so (benchmarks/NOTES.md). On the CPU, whose
    kernel already takes every core, the thread does not pay: it is for GPU engines.

    Parameters
    ----------
    engine : KSpaceEngine
        Computes :meth:`KSpaceEngine.amplitudes`, in this object's thread only.
    store : callable
        ``store(key, amplitudes)``, called in the caller's thread (from :meth:`submit` and
        :meth:`finish`), in the order of the submissions.
    depth : int
        Frames in flight at most (default :data:`FRAMES_IN_FLIGHT`): :meth:`submit` stores
        the oldest beyond it.

    Examples
    --------
    >>> import numpy as np
    >>> from mdakit_fastrdf.engine.kspace import AmplitudesInFlight, KSpaceEngine
    >>> rows = {}
    >>> queue = AmplitudesInFlight(KSpaceEngine("cpu"), rows.__setitem__, depth=2)
    >>> box = np.diag([10.0, 10.0, 10.0])
    >>> for frame in range(3):
    ...     queue.submit(frame, [[2.5 * frame, 0, 0]], [0, 1], box, [[1, 0, 0]])
    >>> queue.finish()
    >>> np.round(rows[2], 12)  # exp(i 2 pi 5 / 10)
    array([[-1.+0.j]])
    """

    def __init__(self, engine, store, depth=FRAMES_IN_FLIGHT):
        from concurrent.futures import ThreadPoolExecutor

        if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
            raise ValueError(f"depth must be a positive integer, got {depth!r}")
        self.engine, self.store, self.depth = engine, store, int(depth)
        self._pending = deque()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="fastrdf-kspace")

    def submit(self, key, positions, offsets, box_vectors, n):
        """Queue one frame (`positions` are copied: the caller may reuse its buffer)."""
        if self._executor is None:
            raise RuntimeError("AmplitudesInFlight: submit() after finish()")
        future = self._executor.submit(self.engine.amplitudes, np.array(positions), offsets,
                                       box_vectors, n)
        self._pending.append((key, future))
        self._store(self.depth)

    def _store(self, keep):
        while len(self._pending) > keep:
            key, future = self._pending.popleft()
            self.store(key, future.result())

    def finish(self):
        """Store every frame still in flight and end the thread (also after an error: the
        frames not yet computed are dropped)."""
        try:
            self._store(0)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
                self._executor = None
                self._pending.clear()

