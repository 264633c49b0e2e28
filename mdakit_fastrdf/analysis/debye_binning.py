r"""How far placing each pair at its bin centre can move a Debye sum: the bound
:func:`binning_error_bound` that :class:`~mdakit_fastrdf.DebyeScattering` reports with every
intensity (pure NumPy, no kernel)."""

from __future__ import annotations

import builtins

import numpy as np

__all__ = ["DSINC_MAX", "binning_error_bound"]

#: :math:`\max_x |\mathrm{d}\,\mathrm{sinc}(x)/\mathrm{d}x|` (at :math:`x \approx 2.0816`:
#: 0.436182), rounded up.
DSINC_MAX = 0.43619

def _dsinc(x):
    r""":math:`\mathrm{sinc}'(x) = (x\cos x - \sin x)/x^2` (its series below 0.01)."""
    x = np.asarray(x, dtype=np.float64)
    small = x < 1e-2
    xs = np.where(small, 1.0, x)
    out = (xs * np.cos(xs) - np.sin(xs)) / xs**2
    return np.where(small, -x / 3 + x**3 / 30, out)


def _omega(q, centres, half):
    r"""``(n_q, n_bins)``: a bound on :math:`|\mathrm{sinc}(qr) - \mathrm{sinc}(q r_k)|` over
    :math:`|r - r_k| \le h` (see :func:`binning_error_bound`)."""
    qh = np.multiply.outer(q, np.full_like(centres, half))
    xc = np.multiply.outer(q, centres)
    x_lo = np.maximum(xc - qh, 0.0)
    x_hi = xc + qh
    with np.errstate(divide="ignore"):
        tail = np.where(x_lo > 0, 1.0 / np.where(x_lo > 0, x_lo, 1.0) + 1.0 / np.where(
            x_lo > 0, x_lo, 1.0) ** 2, np.inf)
    lipschitz = qh * np.minimum(np.minimum(x_hi / 3.0, DSINC_MAX), tail)
    taylor = qh * np.abs(_dsinc(xc)) + qh**2 / 6.0
    # a relative 1e-12 and an absolute 1e-15 cover the rounding of the float64 evaluation
    return np.minimum(lipschitz, taylor) * (1 + 1e-12) + 1e-15


def binning_error_bound(histograms, centres, half_width, q, pair_weights):
    r"""The largest error that placing each pair at its bin centre can make on a Debye sum.

    For pair histograms :math:`h_{p,k}` (pairs per frame of species pair :math:`p` in bin
    :math:`k`, centre :math:`r_k`, every pair within :math:`h` of its centre) and weights
    :math:`c_p(q)` (e.g. :math:`m_p f_a f_b`),

    .. math::

        \Bigl|\sum_p c_p \sum_{\text{pairs } ij \in p} \mathrm{sinc}(q r_{ij})
        - \sum_p c_p \sum_k h_{p,k}\, \mathrm{sinc}(q r_k)\Bigr|
        \le B(q) = \sum_p |c_p(q)| \sum_k h_{p,k}\, \omega_k(q),

    .. math::

        \omega_k(q) = \min\Bigl(qh\, \min\bigl(\tfrac{x_k^+}{3},\, D,\,
        \tfrac{1}{x_k^-} + \tfrac{1}{(x_k^-)^2}\bigr),\;
        qh\,|\mathrm{sinc}'(q r_k)| + \tfrac{(qh)^2}{6}\Bigr)

    with :math:`x_k^\pm = q(r_k \pm h)` (:math:`x_k^- \ge 0`) and :math:`D =` :data:`DSINC_MAX`.
    The first is the mean value theorem with three bounds of :math:`|\mathrm{sinc}'|` on the
    bin: :math:`\mathrm{sinc}(x) = \int_0^1 \cos(xt)\,dt` gives :math:`|\mathrm{sinc}'(x)| =
    |\int_0^1 t \sin(xt)\,dt| \le x/3`, its maximum is :math:`D`, and :math:`|x\cos x - \sin
    x|/x^2 \le 1/x + 1/x^2`; the second is Taylor's theorem at the centre with
    :math:`|\mathrm{sinc}''| \le \int_0^1 t^2\,dt = 1/3`. It holds for any distances within
    the bins.

    Parameters
    ----------
    histograms : array_like
        ``(n_pairs, n_bins)`` pairs per frame.
    centres : array_like
        ``(n_bins,)`` bin centres, Å.
    half_width : float
        :math:`h`, Å: half the bin width (plus any error of the distances themselves).
    q : array_like
        ``(n_q,)`` Å⁻¹.
    pair_weights : array_like
        ``(n_pairs, n_q)`` :math:`c_p(q)`.

    Returns
    -------
    numpy.ndarray
        ``(n_q,)`` :math:`B(q)`.
    """
    histograms = np.asarray(histograms, dtype=np.float64)
    centres = np.asarray(centres, dtype=np.float64)
    q = np.atleast_1d(np.asarray(q, dtype=np.float64))
    weights = np.abs(np.asarray(pair_weights, dtype=np.float64))
    out = np.empty(len(q), dtype=np.float64)
    step = max(1, (1 << 22) // max(1, len(centres)))
    for i in builtins.range(0, len(q), step):
        omega = _omega(q[i:i + step], centres, float(half_width))
        out[i:i + step] = np.sum(weights[:, i:i + step]
                                 * np.einsum("pk,qk->pq", histograms, omega), axis=0)
    return out
