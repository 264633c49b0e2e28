r"""The dynamic structure factor :math:`S(q, \omega)`: the time Fourier transform of the
intermediate scattering functions of :mod:`.intermediate_scattering`, with a stated window.
"""

from __future__ import annotations

import numbers

import numpy as np

from .declarations import Field, OutputSpec
from .intermediate_scattering import IntermediateScattering

__all__ = ["DynamicStructureFactor", "spectrum"]

WINDOWS = ("hann", "none")


def _window(name, n_lags) -> np.ndarray:
    """:math:`w_k` at the lags :math:`k = 0 \\dots L`, with :math:`w_0 = 1`."""
    k = np.arange(n_lags, dtype=np.float64)
    if name == "hann":
        return 0.5 * (1.0 + np.cos(np.pi * k / n_lags))
    return np.ones(n_lags)


def spectrum(f, dt, window="hann"):
    r"""The windowed Fourier transform of a time correlation even in time.

    .. math::

        S(\omega_j) = \frac{\Delta t}{2\pi} \sum_{k=-L}^{L} F(|t_k|)\, w(|t_k|)\,
        e^{-i \omega_j t_k}, \qquad \omega_j = \frac{2\pi j}{(2L+1)\,\Delta t},\;
        j = -L, \dots, L,

    with :math:`F(-t) = F(t)` (classical correlations), :math:`t_k = k\Delta t` and the
    window :math:`w_k = \tfrac12\,[1 + \cos(\pi k / (L+1))]` (``'hann'``; it goes to zero
    one step after the last lag) or :math:`w_k = 1` (``'none'``). Because :math:`w_0 = 1`
    the discrete sum rule holds exactly:

    .. math::

        \sum_j S(\omega_j)\, \Delta\omega = F(0), \qquad
        \Delta\omega = \frac{2\pi}{(2L+1)\,\Delta t}.

    Parameters
    ----------
    f : array_like, (L + 1, ...)
        :math:`F` at the lags :math:`0, 1, \dots, L` (time on axis 0), real.
    dt : float
        The time between lags (ps).
    window : {'hann', 'none'}

    Returns
    -------
    omega : numpy.ndarray, (2L + 1,)
        Angular frequencies (rad/ps), increasing, zero in the middle.
    s : numpy.ndarray, (2L + 1, ...)
        :math:`S(\omega)` (ps), real.
    """
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    f = np.asarray(f, dtype=np.float64)
    if isinstance(dt, bool) or not isinstance(dt, numbers.Real) or not dt > 0:
        raise ValueError(f"dt: the time between lags must be positive (ps), got {dt!r}; "
                         "a run of one frame has no time axis")
    n = f.shape[0]
    w = _window(window, n).reshape((-1,) + (1,) * (f.ndim - 1))
    g = f * w
    m = 2 * n - 1
    full = np.concatenate([g, g[:0:-1]], axis=0)  # g_0 .. g_L, g_L .. g_1: even in time
    s = np.fft.fftshift(np.fft.fft(full, axis=0).real, axes=0) * dt / (2 * np.pi)
    omega = np.fft.fftshift(np.fft.fftfreq(m, d=dt)) * 2 * np.pi
    return omega, s


class DynamicStructureFactor(IntermediateScattering):
    r"""The dynamic structure factor :math:`S(q, \omega)` of a trajectory.

    :class:`~mdakit_fastrdf.analysis.intermediate_scattering.IntermediateScattering`
    (same parameters) gives :math:`F(q, t)` and :math:`F_s(q, t)` at the lags
    :math:`0, 1, \dots, L`; each is then transformed by :func:`spectrum`:

    .. math::

        S(q, \omega) = \frac{1}{2\pi} \int_{-t_L}^{t_L} F(q, t)\, w(t)\, e^{-i\omega t}\,dt

    as a discrete sum over the lags, with a Hann window
    :math:`w(t) = \tfrac12[1 + \cos(\pi t / t_{L+1})]` by default (``window='none'``:
    a plain truncation, with its ripples). The sum rule
    :math:`\int S(q, \omega)\, d\omega = F(q, 0) = S(q)` holds to rounding on the discrete
    frequency grid. The resolution is :math:`\Delta\omega = 2\pi / ((2L+1)\Delta t)`.

    Parameters
    ----------
    atomgroup, q, by, weights, origins, dq, self_part, coherent, device, n_threads
        As for :class:`IntermediateScattering`.
    lags : int
        The last lag :math:`L` (analysed frames): every lag :math:`0 \dots L` is needed.
    window : {'hann', 'none'}
        Keyword only.

    Attributes
    ----------
    results.omega : numpy.ndarray
        ``(2L + 1,)`` angular frequencies (rad/ps), increasing.
    results.s_coherent, results.s_total : numpy.ndarray
        ``(n_pairs, 2L + 1, n_q)`` and ``(2L + 1, n_q)``: from ``f_coherent`` and
        ``f_total`` (ps).
    results.s_self, results.s_self_total : numpy.ndarray
        ``(n_species, 2L + 1, n_q)`` and ``(2L + 1, n_q)``: from ``f_self`` and
        ``f_self_total`` (ps).
    results.window : str
        The window used.

    Besides every result of :class:`IntermediateScattering`.
    """

    outputs = OutputSpec(fields=(
        *IntermediateScattering.outputs.fields,
        Field("omega", "rad/ps", "angular frequency"),
        Field("s_coherent", "ps", "coherent S_ab(q, omega) of each species pair"),
        Field("s_total", "ps", "weighted coherent S(q, omega)"),
        Field("s_self", "ps", "self S_s(q, omega) of each species"),
        Field("s_self_total", "ps", "weighted self S_s(q, omega)"),
    ))

    def __init__(self, atomgroup, q, lags, *, window="hann", **kwargs):
        if isinstance(lags, bool) or not isinstance(lags, (numbers.Integral, np.integer)):
            raise TypeError(f"lags must be an int L (every lag 0 .. L, as the Fourier "
                             f"transform needs), got {lags!r}")
        if lags < 1:
            raise ValueError(f"lags={lags}: S(q, omega) needs at least lags=1")
        if window not in WINDOWS:
            raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
        self.window = window
        super().__init__(atomgroup, q, lags, **kwargs)

    def _normalise(self, res):
        super()._normalise(res)
        times = np.asarray(res.times, dtype=np.float64)
        dt = float(times[1] - times[0])
        if not dt > 0:
            raise ValueError("the trajectory's time step is zero: set dt when loading it, "
                             "so that lags have a time")
        res.window = self.window
        for src, dst, axis in (("f_total", "s_total", 0), ("f_coherent", "s_coherent", 1),
                               ("f_self_total", "s_self_total", 0), ("f_self", "s_self", 1)):
            if src in res:
                f = np.moveaxis(np.asarray(res[src]), axis, 0)
                omega, s = spectrum(f, dt, self.window)
                res[dst] = np.moveaxis(s, 0, axis)
                res.omega = omega
