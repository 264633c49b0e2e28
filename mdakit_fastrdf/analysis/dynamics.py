r"""Time correlations of per-frame quantities: what the dynamical analyses share.

* :func:`check_lags` and :func:`check_origins`: the lags (in analysed frames) and the
  stride between time origins a user asks for;
* :func:`unwrap_positions`: positions made whole across the periodic box from consecutive
  frames, as MDAnalysis's ``NoJump`` transformation does;
* :func:`time_correlation`: :math:`C(\tau) = \langle x(t_0)\, y^*(t_0 + \tau)\rangle_{t_0}`
  over the time origins, with FFTs (Wiener–Khinchin) when every frame is an origin.

The per-frame quantities come from the shared base's per-frame rows, gathered in frame
order from every parallel backend, so these functions see the whole run and the results do
not depend on the backend.
"""

from __future__ import annotations

import numbers

import numpy as np

from .declarations import Field

__all__ = ["MAX_STEP_FRACTION", "check_lags", "check_origins", "origin_frames",
           "time_correlation", "unwrap_positions"]

#: :func:`unwrap_positions` refuses a trajectory in which an atom moves more than this
#: fraction of the box's smallest perpendicular width between two analysed frames: the
#: minimum image of a step is the true step only while the true step is below half a
#: width, and a step already seen at 0.35 widths says that longer ones, which would be
#: folded back unseen, are likely.
MAX_STEP_FRACTION = 0.35


def check_lags(lags, n_frames) -> np.ndarray:
    """The lags (in analysed frames) as a sorted int64 array without repeats.

    Parameters
    ----------
    lags : int or sequence of int
        An int ``L`` means every lag ``0, 1, ..., L``; a sequence lists them.
    n_frames : int
        Frames of the run: a lag must be below it.

    Raises
    ------
    ValueError
        Negative, non-integer, empty, or too long lags (naming the largest allowed).
    """
    n_frames = int(n_frames)
    if isinstance(lags, (numbers.Integral, np.integer)) and not isinstance(lags, bool):
        if lags < 0:
            raise ValueError(f"lags={lags}: a lag is a number of frames >= 0")
        out = np.arange(int(lags) + 1, dtype=np.int64)
    else:
        try:
            arr = np.asarray(lags)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.ndim != 1 or arr.dtype == bool \
                or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"lags must be an int (every lag up to it) or a sequence of ints "
                            f"(frames), got {lags!r}")
        if arr.size == 0:
            raise ValueError("lags: give at least one lag")
        if np.any(arr < 0):
            raise ValueError(f"lags={lags!r}: a lag is a number of frames >= 0")
        out = np.unique(arr.astype(np.int64))
    if out[-1] >= n_frames:
        raise ValueError(
            f"lags: lag {int(out[-1])} needs {int(out[-1]) + 1} frames, but the run has "
            f"{n_frames}; the largest lag allowed is {n_frames - 1}")
    return out


def time_step(times) -> float:
    """The spacing of the analysed frames' `times` (ps; 0 for one frame), or a ValueError
    when they are not evenly spaced (a lag would not be one time)."""
    dt = np.diff(np.asarray(times, dtype=np.float64))
    if len(dt) and not np.allclose(dt, dt[0], rtol=1e-4, atol=1e-6):
        raise ValueError("frames: the analysed frames are not evenly spaced in time, so "
                         "a lag is not one time; analyse evenly spaced frames")
    return float(dt[0]) if len(dt) else 0.0


#: the outputs every time correlation declares: its lags in time and in frames
LAG_FIELDS = (
    Field("times", "ps", "time lag"),
    Field("lags", "frames", "time lag in analysed frames", integer=True),
)


class CorrelationRun:
    """Mixin of the time-correlation analyses: :meth:`_init_correlation` checks their
    common options, :meth:`run` the lags against the frames of the run (``self.lags``)
    and refuses ``blocks``."""

    def _init_correlation(self, lags, origins, **parts):
        """Check and set `parts` (each part of the analysis to compute: True or False, at
        least one True), ``origins`` and the lags asked (their type and signs now, against
        the run's frames in :meth:`run`)."""
        for name, value in parts.items():
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if not any(parts.values()):
            raise ValueError(" and ".join(f"{name}=False" for name in parts)
                             + " leave nothing to compute")
        for name, value in parts.items():
            setattr(self, name, bool(value))
        self.origins = check_origins(origins)
        self._lags_asked = lags
        check_lags(lags, max(2, len(self._trajectory)) * 10**9)

    def run(self, start=None, stop=None, step=None, frames=None, verbose=None, **kwargs):
        """Perform the calculation (see :meth:`PairHistogramBase.run`; ``blocks`` is not
        taken: the time correlations need every frame of the run)."""
        if kwargs.get("blocks") is not None:
            raise ValueError(f"blocks: {type(self).__name__} correlates frames across the "
                             f"whole run; run it on parts of the trajectory instead")
        if frames is None:
            n = len(range(*self._trajectory.check_slice_indices(start, stop, step)))
        else:
            n = len(np.arange(len(self._trajectory))[frames])
        self.lags = check_lags(self._lags_asked, n)
        return super().run(start=start, stop=stop, step=step, frames=frames, verbose=verbose,
                           **kwargs)


def check_static(ag, name):
    """ValueError when `ag` is an UpdatingAtomGroup: a time correlation follows the same atoms
    from frame to frame."""
    from .checks import is_updating

    if is_updating(ag):
        raise ValueError(
            f"{name} is an UpdatingAtomGroup, which selects other atoms in each frame, but a "
            f"time correlation follows the same atoms from frame to frame: pass a static "
            f"AtomGroup (e.g. the atoms it selects now, {name}.atoms)")


def check_origins(origins) -> int:
    """The stride between time origins (a positive int), or a clear error naming
    ``origins``."""
    if isinstance(origins, bool) or not isinstance(origins, (numbers.Integral, np.integer)) \
            or origins < 1:
        raise ValueError(f"origins must be a positive int (every origins-th frame is a time "
                         f"origin), got {origins!r}")
    return int(origins)


def origin_frames(n_frames, lag, origins) -> np.ndarray:
    """The time origins :math:`t_0 = 0, s, 2s, \\dots` with :math:`t_0 + \\tau` below
    `n_frames` (indices of analysed frames, int64; empty when the lag is too long)."""
    lag = int(lag)
    if lag < 0:
        raise ValueError(f"lag={lag}: a lag is a number of frames >= 0")
    return np.arange(0, max(int(n_frames) - lag, 0), check_origins(origins), dtype=np.int64)


def _box_matrices(dimensions) -> np.ndarray:
    from MDAnalysis.lib.mdamath import triclinic_vectors

    dims = np.asarray(dimensions, dtype=np.float64)
    return np.stack([triclinic_vectors(d).astype(np.float64) for d in dims])


def _widths(box) -> np.ndarray:
    """Perpendicular widths of a box (rows a, b, c)."""
    a, b, c = box
    vol = abs(np.dot(a, np.cross(b, c)))
    return np.array([vol / np.linalg.norm(np.cross(b, c)), vol / np.linalg.norm(np.cross(c, a)),
                     vol / np.linalg.norm(np.cross(a, b))])


def unwrap_positions(positions, dimensions, n_threads=None) -> np.ndarray:
    r"""Positions made whole from consecutive frames, as MDAnalysis's ``NoJump`` does.

    Each frame's step from the last is taken to its minimum image in fractional coordinates
    of the box and accumulated from the first frame:

    .. math::

        \mathbf{s}_t = \mathbf{s}_{t-1} + \bigl[(\mathbf{f}_t - \mathbf{f}_{t-1})
        - \mathrm{round}(\mathbf{f}_t - \mathbf{f}_{t-1})\bigr] H_t ,

    with :math:`\mathbf{f} = \mathbf{r} H^{-1}` the fractional coordinates and :math:`H`
    the box (rows a, b, c).

    Parameters
    ----------
    positions : array_like, (F, N, 3)
        Positions (Å) of F consecutive analysed frames, wrapped or not.
    dimensions : array_like, (F, 6)
        The boxes, MDAnalysis ``[a, b, c, alpha, beta, gamma]``.
    n_threads : int, optional
        CPU threads of the compiled pass, over ranges of atoms (None: all the process may
        use).

    Returns
    -------
    numpy.ndarray, (F, N, 3) float64

    Raises
    ------
    ValueError
        A frame without a box, or a step longer than :data:`MAX_STEP_FRACTION` of the
        smallest perpendicular width (the stride between analysed frames is too long to
        unwrap: atoms may have moved half a box unseen).
    """
    from ..engine.displacements import unwrap

    pos = np.asarray(positions)
    dims = np.asarray(dimensions, dtype=np.float64)
    if pos.ndim != 3 or pos.shape[2] != 3 or dims.shape != (pos.shape[0], 6):
        raise ValueError(f"positions must be (F, N, 3) and dimensions (F, 6), got "
                         f"{pos.shape} and {dims.shape}")
    if np.any(~np.isfinite(dims)) or np.any(dims[:, :3] <= 0):
        raise ValueError("dimensions: every frame needs a periodic box to unwrap its "
                         "positions")
    if len(pos) == 0:
        return np.empty(pos.shape, dtype=np.float64)
    # (each distinct box built and inverted once: a box that does not change is one)
    distinct, which = np.unique(dims, axis=0, return_inverse=True)
    which = which.reshape(-1)
    boxes = _box_matrices(distinct)
    out, longest = unwrap(pos, boxes[which], np.linalg.inv(boxes)[which], n_threads)
    widths = np.array([_widths(b).min() for b in boxes])[which]
    bad = np.flatnonzero(longest > MAX_STEP_FRACTION * widths)
    if bad.size:
        t = int(bad[0])
        raise ValueError(
            f"an atom moved {longest[t]:.3g} Å between analysed frames {t - 1} and {t}, more "
            f"than {MAX_STEP_FRACTION} of the box's smallest width ({widths[t]:.3g} Å): atoms "
            f"may have moved half a box unseen, so displacements cannot be made whole. "
            f"Analyse consecutive frames (step=1) or save frames more often")
    return out


def time_correlation(a, b=None, lags=(0,), origins=1, n_threads=None) -> np.ndarray:
    r"""The time correlation of `a` with `b` over the time origins.

    .. math::

        C(\tau) = \frac{1}{n_\tau} \sum_{t_0} a(t_0)\, b^*(t_0 + \tau),

    over the origins :math:`t_0 = 0, s, 2s, \dots` with :math:`t_0 + \tau` in the run
    (:math:`n_\tau` of them), time on axis 0. With ``origins=1`` the sums come from FFTs
    zero-padded to twice the length (no circular wrap; Wiener–Khinchin); otherwise they
    are summed directly.

    Parameters
    ----------
    a, b : array_like, (F, ...)
        Real or complex; ``b=None`` correlates `a` with itself.
    lags : sequence of int
        The lags :math:`\tau` (:func:`check_lags`).
    origins : int
        The stride :math:`s` between time origins.
    n_threads : int, optional
        Threads of the FFTs (:func:`scipy.fft.fft`'s ``workers``, over the transforms of
        axis 1 onwards: the same values for any count); None: every CPU this process may
        use (its affinity: a batch system's or ``taskset``'s allocation).

    Returns
    -------
    numpy.ndarray, (len(lags), ...)
        Complex when `a` or `b` is; float64 otherwise.
    """
    a = np.asarray(a)
    b = a if b is None else np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    n = a.shape[0]
    lags = check_lags(list(lags) if not np.isscalar(lags) else lags, n)
    origins = check_origins(origins)
    complex_out = np.iscomplexobj(a) or np.iscomplexobj(b)
    if origins == 1:
        import scipy.fft

        from ..engine import available_cpus

        # (None: the CPUs this process may use; scipy's -1 would take os.cpu_count(), every
        # CPU of the node, under a batch system's or taskset's narrower affinity too)
        workers = available_cpus() if n_threads is None else max(1, int(n_threads))
        size = 1 << int(np.ceil(np.log2(max(2 * n, 2))))
        fa = scipy.fft.fft(a, n=size, axis=0, workers=workers)
        fb = fa if b is a else scipy.fft.fft(b, n=size, axis=0, workers=workers)
        # sum_t0 conj(a(t0)) b(t0 + tau), then conjugated: a(t0) conj(b(t0 + tau))
        full = np.conj(scipy.fft.ifft(np.conj(fa) * fb, axis=0, workers=workers)[lags])
        counts = (n - lags).astype(np.float64)
        out = full / counts.reshape((-1,) + (1,) * (a.ndim - 1))
    else:
        out = np.empty((len(lags),) + a.shape[1:],
                       dtype=np.complex128 if complex_out else np.float64)
        for k, tau in enumerate(lags):
            t0 = origin_frames(n, tau, origins)
            out[k] = np.mean(a[t0] * np.conj(b[t0 + tau]), axis=0)
        return out
    return out if complex_out else out.real


# -- the command line's shared options ------------------------------------------------------

def _lags_option():
    from .declarations import Option

    return Option(("--lags",), "lags", {"type": int, "default": 5, "metavar": "L",
                                        "help": "lags 0 .. L in analysed frames (default: 5)"})


#: the demo system of the time-correlation commands (``Command(**DEMO, ...)``): the water
#: oxygens of MDAnalysisTests' alanine dipeptide, whose trajectory has a time step
DEMO = {"select": "resname WAT and name O", "demo": ("PRMpbc", "TRJpbc_bz2"),
        "demo_about": "alanine dipeptide in 1,683 waters, 11 frames", "guess_elements": True}


def command_options():
    """The options every time-correlation command shares (``--lags``, ``--origins``,
    ``--by``, ``--no-self``)."""
    from .declarations import Option

    return (
        _lags_option(),
        Option(("--origins",), "origins", {"type": int, "metavar": "S",
                                           "help": "every S-th analysed frame is a time "
                                                   "origin (default: 1, all)"}),
        Option(("--by",), "by", {"help": "species: element, name, type, resname"}),
        Option(("--no-self",), "self_part", {"action": "store_const", "const": False,
                                             "help": "skip the self part"}),
    )
