r"""What every scattering analysis shares: elements, form factors, weights and the sinc
transform of pair-distance histograms.

Scattering intensities are transforms of the pair-distance histograms the package already
accumulates (Debye's equation; CADISHI's first section: K. Reuter and J. Köfinger,
*Comput. Phys. Commun.* **236**, 274 (2019), doi:10.1016/j.cpc.2018.10.018). This module
holds, once, what the analyses built on them need:

* the element of every atom and of every species, from the topology's ``elements``
  (:func:`atom_elements`, :func:`species_elements`), with a clear error naming the atoms
  whose element is unknown and the fix;
* species grouping with the ``by`` of :class:`~mdakit_fastrdf.SpeciesRDF`
  (:func:`species_groups`, the same function);
* X-ray atomic form factors :math:`f(q)` (:func:`xray_form_factor`), neutron coherent
  scattering lengths :math:`b_c` (:func:`neutron_scattering_length`), and the weights of
  each species on a grid of :math:`q` (:func:`species_weights`): X-ray, neutron, one per
  atom (``'number'``) or given by the user per species;
* the matrix :math:`\sin(q r_k)/(q r_k)` of bin centres :math:`r_k` and its product with
  histograms (:func:`sinc_matrix`, :func:`sinc_transform`).

Units: :math:`q = 4\pi\sin\theta/\lambda` in Å⁻¹, distances in Å, X-ray form factors in
electrons, neutron scattering lengths in fm.

Sources of the data (both through the ``periodictable`` package, no table is typed here):

* X-ray form factors: ``periodictable.cromermann``, which despite its name evaluates the
  five-Gaussian fits of D. Waasmaier and A. Kirfel, *Acta Cryst.* A **51**, 416 (1995)
  (DABAX file ``f0_WaasKirf.dat``) to the non-dispersive form factors :math:`f_0` of
  neutral atoms of International Tables for Crystallography Vol. C, Table 6.1.1.1:
  :math:`f_0(s) = c + \sum_{i=1}^{5} a_i \exp(-b_i s^2)`, :math:`s = \sin\theta/\lambda =
  q/4\pi`, valid for :math:`0 \le s \le 6` Å⁻¹ (:math:`q \le 24\pi \approx 75.4` Å⁻¹), for
  H to Cf. Anomalous dispersion (:math:`f'`, :math:`f''`) is not included. Deuterium and
  tritium take hydrogen's form factor.
* Neutron scattering lengths: ``periodictable``'s neutron table (the bound coherent
  scattering lengths :math:`b_c` of the Atominstitut table, Rauch & Waschkowski 2003,
  which extends Sears 1992), natural isotopic abundance; ``'D'`` and ``'T'`` are the
  isotopes. For absorbing nuclei (e.g. B, Cd, Gd) the real part is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "XRAY_Q_MAX",
    "atom_elements",
    "element_symbol",
    "neutron_scattering_length",
    "sinc_matrix",
    "sinc_transform",
    "species_elements",
    "species_groups",
    "species_weights",
    "xray_form_factor",
]

#: The largest q (Å⁻¹) of the Waasmaier–Kirfel fits: :math:`\sin\theta/\lambda \le 6`.
XRAY_Q_MAX = 24.0 * np.pi

#: Weight kinds that :func:`species_weights` takes by name.
WEIGHT_KINDS = ("xray", "neutron", "number")

_ISOTOPES = {"D": "H", "T": "H"}  # X-rays see the electrons: the isotopes of H are H


def _show(values, limit=5):
    values = list(values)
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def element_symbol(value) -> str:
    """The element symbol of `value` as the periodic table writes it (``'c'``, ``'C'`` ->
    ``'C'``; ``'FE'`` -> ``'Fe'``; ``'D'`` and ``'T'``, the hydrogen isotopes, stay).

    Raises
    ------
    ValueError
        `value` is empty or no element.
    """
    import periodictable

    text = str(value).strip()
    if not text:
        raise ValueError("element: an empty element symbol (the topology does not know the "
                         "element of this atom)")
    symbol = text[0].upper() + text[1:].lower()
    if symbol in _ISOTOPES:
        return symbol
    try:
        el = periodictable.elements.symbol(symbol)
    except ValueError:
        raise ValueError(f"element: {value!r} is not an element symbol") from None
    if el.number == 0:  # periodictable's neutron 'n'
        raise ValueError(f"element: {value!r} is not an element symbol")
    return symbol


def atom_elements(atomgroup) -> np.ndarray:
    """The element symbol of every atom of `atomgroup` (from the topology's ``elements``).

    Raises
    ------
    ValueError
        The topology has no ``elements``, or some atoms have an empty or unknown element;
        the message names the first few atoms (index and name) and the fixes: guess the
        elements (``u.guess_TopologyAttrs(to_guess=['elements'])``), set them
        (``u.add_TopologyAttr('elements', [...])``) or give the weights per species
        (``weights=``).
    """
    fix = ("Guess them (u.guess_TopologyAttrs(to_guess=['elements'])), set them "
           "(u.add_TopologyAttr('elements', [...])), or give the weight of every species "
           "(weights={label: value or callable of q}).")
    try:
        raw = np.asarray(atomgroup.elements)
    except (AttributeError, ValueError):  # MDAnalysis's NoDataError is both
        raise ValueError(
            f"the topology of this Universe has no elements, which X-ray and neutron weights "
            f"need. {fix}") from None
    out = np.empty(len(raw), dtype=object)
    bad = []
    cache = {}
    for k, value in enumerate(raw):
        key = str(value)
        if key not in cache:
            try:
                cache[key] = element_symbol(key)
            except ValueError:
                cache[key] = None
        out[k] = cache[key]
        if cache[key] is None:
            bad.append(k)
    if bad:
        names = getattr(atomgroup, "names", None)
        atoms = [f"index {atomgroup.indices[k]}"
                 + (f" name {names[k]!r}" if names is not None else "")
                 + f" element {str(raw[k])!r}" for k in bad]
        lacking = ""
        if names is not None:  # the names lacking elements, e.g. a virtual site 'MW'
            kinds, counts = np.unique(np.asarray(names)[bad].astype(str), return_counts=True)
            lacking = "; names lacking elements: " + ", ".join(
                f"{str(k)!r} x{c}" for k, c in zip(kinds, counts))
        raise ValueError(
            f"{len(bad)} atom(s) have no known element: {_show(atoms)}{lacking}. A virtual "
            f"site without mass (such as TIP4P's MW) has no element and scatters nothing: "
            f"leave it out of the atoms. {fix}")
    return out.astype(str)


def species_groups(atomgroup, by="element"):
    """``[(label, AtomGroup), ...]`` of the species of `atomgroup`, formed exactly as
    :class:`~mdakit_fastrdf.SpeciesRDF`'s ``by`` forms them (the same function; unsorted)."""
    from .species import group_species

    return group_species(atomgroup, by)


def species_elements(groups, labels=None) -> list:
    """The element of each species (AtomGroup of `groups`); every atom of a species must
    have the same element (see :func:`atom_elements` for the errors).

    Parameters
    ----------
    groups : sequence of AtomGroup
        The species.
    labels : sequence, optional
        Their labels, for the messages.
    """
    labels = list(range(len(groups))) if labels is None else list(labels)
    out = []
    for label, group in zip(labels, groups):
        elements = atom_elements(group)
        uniq = np.unique(elements)
        if len(uniq) != 1:
            raise ValueError(
                f"species {label!r} mixes the elements {list(uniq)}: X-ray and neutron "
                f"weights need one element per species; group by='element', or give the "
                f"weight of every species (weights={{label: value or callable of q}})")
        out.append(str(uniq[0]))
    return out


def _check_q(q, name="q") -> np.ndarray:
    arr = np.asarray(q, dtype=np.float64)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a number or a 1-D array of Å⁻¹, got shape "
                         f"{arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {q!r}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must not be negative (q = 4π sinθ/λ ≥ 0), got "
                         f"{arr[arr < 0][:5]}")
    return arr


def xray_form_factor(element, q) -> np.ndarray:
    r"""The X-ray atomic form factor :math:`f_0(q)` of a neutral atom, in electrons.

    .. math::

        f_0(q) = c + \sum_{i=1}^{5} a_i \exp\!\bigl(-b_i (q/4\pi)^2\bigr)

    with the coefficients of Waasmaier and Kirfel (1995) through ``periodictable`` (see the
    module notes), :math:`q = 4\pi\sin\theta/\lambda`.

    Parameters
    ----------
    element : str
        Element symbol (``'D'``/``'T'`` give hydrogen's). An ion of the table
        (``'Na1+'``, ``'O2-'``) is taken as given.
    q : float or array_like
        Å⁻¹, from 0 to :data:`XRAY_Q_MAX`.

    Returns
    -------
    numpy.ndarray
        float64, the shape of `q`.

    Examples
    --------
    >>> from mdakit_fastrdf.analysis.scattering import xray_form_factor
    >>> round(float(xray_form_factor("O", 0.0)), 2)     # f(0) = Z
    8.0
    """
    from periodictable import cromermann

    q = _check_q(q)
    if np.any(q > XRAY_Q_MAX):
        raise ValueError(
            f"q: the X-ray form factors of Waasmaier and Kirfel hold for q <= 24π ≈ "
            f"{XRAY_Q_MAX:.1f} Å⁻¹ (sinθ/λ <= 6 Å⁻¹); got q up to {q.max():g}")
    text = str(element).strip()
    ion = text[-1:] in "+-" and len(text) > 1
    symbol = text if ion else _ISOTOPES.get(element_symbol(text), element_symbol(text))
    try:
        formula = cromermann.getCMformula(symbol)
    except KeyError:
        raise ValueError(
            f"element: no X-ray form factor for {element!r} in the Waasmaier–Kirfel table "
            f"(neutral atoms H to Cf and some ions); give its weight yourself "
            f"(weights={{label: value or callable of q}})") from None
    return np.asarray(formula.atstol(q / (4.0 * np.pi)), dtype=np.float64)


def neutron_scattering_length(element) -> float:
    """The bound coherent neutron scattering length :math:`b_c` of an element in its
    natural isotopic composition (``'D'``, ``'T'``: the isotopes), in fm.

    Raises
    ------
    ValueError
        No such element, or the table has no :math:`b_c` for it.

    Examples
    --------
    >>> from mdakit_fastrdf.analysis.scattering import neutron_scattering_length
    >>> neutron_scattering_length("H") < 0     # hydrogen scatters with the opposite sign
    True
    """
    import periodictable

    symbol = element_symbol(element)
    el = periodictable.elements.symbol(symbol)
    b = getattr(getattr(el, "neutron", None), "b_c", None)
    if b is None or not np.isfinite(b):
        raise ValueError(
            f"element: the neutron table has no coherent scattering length for {symbol!r}; "
            f"give its weight yourself (weights={{label: value}})")
    return float(np.real(b))


def _find_label(mapping, label):
    """The value of `mapping` for species `label` (a string label matches
    case-insensitively when that is unambiguous); KeyError when absent."""
    if label in mapping:
        return mapping[label]
    if isinstance(label, str):
        hits = [k for k in mapping if isinstance(k, str) and k.lower() == label.lower()]
        if len(hits) == 1:
            return mapping[hits[0]]
    raise KeyError(label)


def _user_weight(label, value, q):
    if callable(value):
        try:
            w = value(q.copy())
        except Exception as exc:
            raise ValueError(f"weights: the callable of species {label!r} failed on q: "
                             f"{exc}") from exc
    else:
        w = value
    try:
        w = np.broadcast_to(np.asarray(w, dtype=np.float64), q.shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"weights: species {label!r} must weigh a number or a callable returning one "
            f"value per q ({q.shape}), got {w!r}") from None
    if not np.all(np.isfinite(w)):
        raise ValueError(f"weights: the weight of species {label!r} is not finite")
    return w


def species_weights(species: Sequence, q, weights: str | Mapping = "xray",
                    elements: Sequence | None = None) -> np.ndarray:
    r"""The scattering weight :math:`w_a(q)` of every species on the grid `q`.

    Parameters
    ----------
    species : sequence
        Species labels (e.g. ``results.species``).
    q : float or array_like
        Å⁻¹ (non-negative).
    weights : {'xray', 'neutron', 'number'} or mapping
        ``'xray'``: the atomic form factors :math:`f_a(q)` (electrons,
        :func:`xray_form_factor`); ``'neutron'``: the coherent scattering lengths
        :math:`b_{c,a}` (fm, :func:`neutron_scattering_length`), constant in :math:`q`;
        ``'number'``: 1 for every atom (the pair-distance transform alone); a mapping
        ``{label: number or callable}``: the weight of each species, a constant or a
        function of the array `q` returning one value per q (every species needs one).
    elements : sequence of str, optional
        The element of each species (``'xray'``, ``'neutron'``); default: the labels
        themselves (species grouped ``by='element'``).

    Returns
    -------
    numpy.ndarray
        ``(n_species, n_q)`` float64.

    Raises
    ------
    ValueError
        An unknown weight kind, an unknown element, an element without data, a species
        missing from the mapping, a weight that is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from mdakit_fastrdf.analysis.scattering import species_weights
    >>> species_weights(["O", "H"], np.array([0.0, 1.0]), "neutron").round(3)
    array([[ 5.804,  5.804],
           [-3.741, -3.741]])
    """
    q = np.atleast_1d(_check_q(q))
    species = list(species)
    out = np.empty((len(species), len(q)), dtype=np.float64)
    if isinstance(weights, Mapping):
        missing = []
        for k, label in enumerate(species):
            try:
                value = _find_label(weights, label)
            except KeyError:
                missing.append(label)
                continue
            out[k] = _user_weight(label, value, q)
        if missing:
            raise ValueError(
                f"weights: no weight for the species {missing!r} (the species are "
                f"{species!r}); give one for every species")
        return out
    if not isinstance(weights, str) or weights.lower() not in WEIGHT_KINDS:
        raise ValueError(
            f"weights must be 'xray', 'neutron', 'number' or a mapping {{species label: "
            f"number or callable of q}}, got {weights!r}")
    kind = weights.lower()
    if kind == "number":
        out[:] = 1.0
        return out
    elements = species if elements is None else list(elements)
    if len(elements) != len(species):
        raise ValueError(f"elements: one element per species ({len(species)}), got "
                         f"{len(elements)}")
    for k, element in enumerate(elements):
        try:
            if kind == "xray":
                out[k] = xray_form_factor(element, q)
            else:
                out[k] = neutron_scattering_length(element)
        except ValueError as exc:
            raise ValueError(f"species {species[k]!r}: {exc}") from None
    return out


def sinc_matrix(q, r) -> np.ndarray:
    r"""The matrix :math:`\operatorname{sinc}(q_i r_k) = \sin(q_i r_k)/(q_i r_k)` (1 where
    :math:`q_i r_k = 0`), ``(n_q, n_r)`` float64: the kernel of Debye's equation for pairs
    at the distances `r` (e.g. bin centres)."""
    q = np.atleast_1d(_check_q(q))
    r = np.atleast_1d(_check_q(r, "r"))
    return np.sinc(np.multiply.outer(q, r) / np.pi)


def sinc_transform(values, r, q, *, chunk_bytes: int = 1 << 25) -> np.ndarray:
    r"""The sums :math:`\sum_k v_{\ldots k}\, \sin(q r_k)/(q r_k)` for every q.

    Parameters
    ----------
    values : array_like
        ``(..., n_r)`` histograms (e.g. pair counts per frame of each species pair).
    r : array_like
        ``(n_r,)`` the distance of each bin (its centre), Å.
    q : array_like
        ``(n_q,)`` Å⁻¹.
    chunk_bytes : int, optional
        Keyword only. The largest block of the sinc matrix held at once (the q grid is
        taken in chunks, so wide histograms need no ``n_q x n_r`` matrix).

    Returns
    -------
    numpy.ndarray
        ``(..., n_q)`` float64.
    """
    values = np.asarray(values, dtype=np.float64)
    r = np.atleast_1d(_check_q(r, "r"))
    q = np.atleast_1d(_check_q(q))
    if values.shape[-1:] != r.shape:
        raise ValueError(f"values has shape {values.shape}; its last axis must hold one value "
                         f"per distance ({len(r)})")
    out = np.empty(values.shape[:-1] + (len(q),), dtype=np.float64)
    step = max(1, int(chunk_bytes // (8 * max(1, len(r)))))
    for i in range(0, len(q), step):
        # einsum, not BLAS: a plain loop, the same bits on every machine and no BLAS threads
        # competing with the kernels' on a busy node
        out[..., i:i + step] = np.einsum("...k,qk->...q", values, sinc_matrix(q[i:i + step], r))
    return out

