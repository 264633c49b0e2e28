r"""Kirkwood–Buff integrals, the thermodynamics of binary mixtures: excess
coordination numbers, preferential solvation, activity derivative, partial molar volumes
and compressibility from :math:`G_{ab}`."""

from __future__ import annotations

import numpy as np
from MDAnalysis.analysis.results import Results

from .kb_integrals import _K_B, _check_positive


# -- binary mixtures --------------------------------------------------------------------------
def excess_coordination_numbers(kb, density):
    r"""Excess coordination numbers :math:`N_{ab} = \rho_b G_{ab}`.

    The excess (over a uniform distribution at the mean density) number of :math:`b`
    molecules around an :math:`a` molecule in the whole correlation volume (Ben-Naim,
    *Molecular Theory of Solutions*, Oxford University Press (2006)).

    Parameters
    ----------
    kb : array_like
        ``(..., n, n)`` :math:`G_{ab}` in Å³.
    density : array_like
        ``(..., n)`` number densities :math:`\rho_b` in Å⁻³.

    Returns
    -------
    numpy.ndarray
        ``(..., n, n)`` :math:`N_{ab}` (row :math:`a`, column :math:`b`).
    """
    kb = np.asarray(kb, dtype=np.float64)
    density = np.asarray(density, dtype=np.float64)
    if kb.ndim < 2 or kb.shape[-1] != kb.shape[-2] or density.shape[-1:] != kb.shape[-1:]:
        raise ValueError(f"kb must be (..., n, n) and density (..., n); got {kb.shape} and "
                         f"{density.shape}")
    return kb * density[..., None, :]


def binary_mixture(kb, density, temperature=None):
    r"""What Kirkwood–Buff theory gives for a binary mixture of species 1 and 2.

    With :math:`\Delta_{12} = G_{11} + G_{22} - 2G_{12}`,
    :math:`\eta = \rho_1 + \rho_2 + \rho_1\rho_2\Delta_{12}` and
    :math:`\zeta = 1 + \rho_1 G_{11} + \rho_2 G_{22} + \rho_1\rho_2(G_{11}G_{22} -
    G_{12}^2)` (Kirkwood and Buff, *J. Chem. Phys.* **19**, 774 (1951); Ben-Naim,
    *Molecular Theory of Solutions* (2006); Newman, *Chem. Soc. Rev.* **23**, 31 (1994)):

    .. math::

        \bar V_1 = \frac{1 + \rho_2 (G_{22} - G_{12})}{\eta},\qquad
        \bar V_2 = \frac{1 + \rho_1 (G_{11} - G_{12})}{\eta},\qquad
        \kappa_T k_B T = \frac{\zeta}{\eta},

    .. math::

        \left(\frac{\partial \ln\gamma_1}{\partial \ln x_1}\right)_{p,T}
        = -\frac{x_1 \rho_2 \Delta_{12}}{1 + x_1 \rho_2 \Delta_{12}}
        = \left(\frac{\partial \ln\gamma_2}{\partial \ln x_2}\right)_{p,T},

    the excess coordination numbers :math:`N_{ab} = \rho_b G_{ab}` and Ben-Naim's
    measures of preferential solvation :math:`\delta_1 = G_{11} - G_{12}` (positive: a
    molecule 1 sees more 1 than 2 beyond their mean densities) and
    :math:`\delta_2 = G_{22} - G_{12}`; :math:`\Delta_{12} = \delta_1 + \delta_2` vanishes
    for a symmetric ideal mixture.

    Parameters
    ----------
    kb : array_like
        ``(..., 2, 2)`` :math:`G_{ab}` in Å³.
    density : array_like
        ``(..., 2)`` :math:`\rho_1, \rho_2` in Å⁻³.
    temperature : float, optional
        K; gives :math:`\kappa_T` in Pa⁻¹.

    Returns
    -------
    Results
        ``mole_fraction`` (``(..., 2)``), ``excess_coordination`` (``(..., 2, 2)``),
        ``preferential_solvation`` (``(..., 2)``, Å³), ``delta_12`` (Å³), ``dlngamma``
        (:math:`\partial\ln\gamma_1/\partial\ln x_1`), ``partial_molar_volume``
        (``(..., 2)``, Å³ per molecule), ``compressibility_kT`` (:math:`\kappa_T k_B T`,
        Å³) and, with `temperature`, ``compressibility`` (:math:`\kappa_T`, Pa⁻¹).
    """
    kb = np.asarray(kb, dtype=np.float64)
    rho = np.asarray(density, dtype=np.float64)
    if kb.shape[-2:] != (2, 2) or rho.shape[-1:] != (2,):
        raise ValueError(f"binary_mixture needs kb of shape (..., 2, 2) and density (..., 2); "
                         f"got {kb.shape} and {rho.shape}")
    if np.any(rho <= 0):
        raise ValueError(f"density must be positive, got {density!r}")
    g11, g22 = kb[..., 0, 0], kb[..., 1, 1]
    g12 = 0.5 * (kb[..., 0, 1] + kb[..., 1, 0])
    r1, r2 = rho[..., 0], rho[..., 1]
    x1 = r1 / (r1 + r2)
    d12 = g11 + g22 - 2 * g12
    eta = r1 + r2 + r1 * r2 * d12
    zeta = 1 + r1 * g11 + r2 * g22 + r1 * r2 * (g11 * g22 - g12 * g12)
    res = Results(
        mole_fraction=np.stack([x1, 1 - x1], axis=-1),
        excess_coordination=excess_coordination_numbers(kb, rho),
        preferential_solvation=np.stack([g11 - g12, g22 - g12], axis=-1),
        delta_12=d12,
        dlngamma=-x1 * r2 * d12 / (1 + x1 * r2 * d12),
        partial_molar_volume=np.stack([(1 + r2 * (g22 - g12)) / eta,
                                       (1 + r1 * (g11 - g12)) / eta], axis=-1),
        compressibility_kT=zeta / eta,
    )
    if temperature is not None:
        t = float(_check_positive(temperature, "temperature"))
        res.compressibility = res.compressibility_kT * 1e-30 / (_K_B * t)
    return res
