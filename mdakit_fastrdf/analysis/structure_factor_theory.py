r"""The theory of :class:`~mdakit_fastrdf.StructureFactor` in pure NumPy: the windows of
the :math:`g(r) \to S(q)` transform, and the Faber–Ziman total and Bhatia–Thornton
combinations of the partial structure factors. :mod:`.structure_factor` exports every name."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["bhatia_thornton", "cosine_window", "faber_ziman_total", "lorch_window"]


def lorch_window(r, r_max) -> np.ndarray:
    r"""Lorch's window :math:`W(r) = \sin(\pi r / r_\mathrm{max}) / (\pi r / r_\mathrm{max})`
    (1 at :math:`r = 0`, 0 at :math:`r_\mathrm{max}`; E. Lorch, *J. Phys. C* **2**, 229
    (1969))."""
    return np.sinc(np.asarray(r, dtype=np.float64) / float(r_max))


def cosine_window(r, r_max, width=None) -> np.ndarray:
    r"""A window flat up to :math:`r_\mathrm{max} - w` and tapered by half a cosine over the
    last :math:`w` of the range (a one-sided Tukey window):

    .. math::

        W(r) = \begin{cases} 1, & r \le r_\mathrm{max} - w, \\
        \tfrac12\bigl[1 + \cos\bigl(\pi\,(r - r_\mathrm{max} + w)/w\bigr)\bigr],
        & r_\mathrm{max} - w < r \le r_\mathrm{max}, \end{cases}

    (1 and flat at :math:`r_\mathrm{max} - w`, 0 with zero slope at
    :math:`r_\mathrm{max}`).

    Parameters
    ----------
    r : array_like
        Distances, Å.
    r_max : float
        End of the range, Å.
    width : float, optional
        Taper width :math:`w`, Å, with :math:`0 < w \le r_\mathrm{max}` (default
        :math:`r_\mathrm{max}/2`; :math:`w = r_\mathrm{max}` is the Hann window).

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> from mdakit_fastrdf.analysis.structure_factor import cosine_window  # (re-exported)
    >>> cosine_window([0.0, 6.0, 9.0, 12.0], 12.0).round(6).tolist()
    [1.0, 1.0, 0.5, 0.0]
    """
    r_max = float(r_max)
    width = _check_taper_width(width, r_max)
    x = np.clip((np.asarray(r, dtype=np.float64) - (r_max - width)) / width, 0.0, 1.0)
    return 0.5 * (1.0 + np.cos(np.pi * x))


def _check_taper_width(width, r_max):
    """The taper width of the cosine window (default r_max / 2), checked."""
    if width is None:
        return 0.5 * r_max
    if isinstance(width, bool) or not isinstance(width, numbers.Real) \
            or not np.isfinite(width) or not 0 < width <= r_max * (1 + 1e-12):
        raise ValueError(f"taper_width must be a number of Å with 0 < taper_width <= r_max "
                         f"= {r_max:g} Å (the cosine window's taper over "
                         f"[r_max - taper_width, r_max]), got {width!r}")
    return min(float(width), r_max)


def faber_ziman_total(partials, pairs, concentrations, weights):
    r"""The Faber–Ziman total structure factor and total scattering function.

    .. math::

        F(q) = \sum_{a,b} c_a c_b\, f_a(q) f_b(q)\, \bigl(S_{ab}(q) - 1\bigr), \qquad
        S(q) = 1 + \frac{F(q)}{\langle f(q)\rangle^2}, \qquad
        \langle f \rangle = \sum_a c_a f_a

    with the sum over ordered species pairs (each :math:`a \ne b` twice).

    Parameters
    ----------
    partials : array_like
        ``(n_pairs, n_q)`` :math:`S_{ab}(q)` of the pairs `pairs`.
    pairs : array_like
        ``(n_pairs, 2)`` species indices :math:`a \le b`.
    concentrations : array_like
        ``(n_species,)`` number fractions :math:`c_a`.
    weights : array_like
        ``(n_species, n_q)`` :math:`f_a(q)` (or constants broadcast to it).

    Returns
    -------
    s, f, mean_f_sq, mean_sq_f : numpy.ndarray
        :math:`S(q)`, :math:`F(q)`, :math:`\langle f\rangle^2` and
        :math:`\langle f^2\rangle = \sum_a c_a f_a^2` (``(n_q,)`` each).
    """
    partials = np.asarray(partials, dtype=np.float64)
    pairs = np.asarray(pairs).reshape(-1, 2)
    c = np.asarray(concentrations, dtype=np.float64)
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64),
                        (len(c), partials.shape[-1]))
    f = np.zeros(partials.shape[-1])
    for k, (a, b) in enumerate(pairs):
        mult = 1.0 if a == b else 2.0
        f = f + mult * c[a] * c[b] * w[a] * w[b] * (partials[k] - 1.0)
    mean_f = (c[:, None] * w).sum(axis=0)
    mean_f_sq = mean_f ** 2
    mean_sq_f = (c[:, None] * w ** 2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = 1.0 + f / mean_f_sq
    return s, f, mean_f_sq, mean_sq_f


def bhatia_thornton(s11, s22, s12, c1):
    r"""Bhatia–Thornton number–concentration structure factors of a binary system from its
    Faber–Ziman partials (A. B. Bhatia and D. E. Thornton, *Phys. Rev. B* **2**, 3004
    (1970); in Faber–Ziman partials as in P. S. Salmon, *Proc. R. Soc. A* **437**, 591
    (1992)), with :math:`c_2 = 1 - c_1`:

    .. math::

        S_{NN} &= c_1^2 S_{11} + c_2^2 S_{22} + 2 c_1 c_2 S_{12}, \\
        S_{NC} &= c_1 c_2 \bigl[c_1 (S_{11} - S_{12}) - c_2 (S_{22} - S_{12})\bigr], \\
        S_{CC} &= c_1 c_2 \bigl[1 + c_1 c_2 (S_{11} + S_{22} - 2 S_{12})\bigr].

    At large :math:`q`, :math:`S_{NN} \to 1`, :math:`S_{NC} \to 0`,
    :math:`S_{CC} \to c_1 c_2`.

    Returns
    -------
    s_nn, s_nc, s_cc : numpy.ndarray
    """
    c2 = 1.0 - c1
    s_nn = c1 * c1 * s11 + c2 * c2 * s22 + 2.0 * c1 * c2 * s12
    s_nc = c1 * c2 * (c1 * (s11 - s12) - c2 * (s22 - s12))
    s_cc = c1 * c2 * (1.0 + c1 * c2 * (s11 + s22 - 2.0 * s12))
    return s_nn, s_nc, s_cc
