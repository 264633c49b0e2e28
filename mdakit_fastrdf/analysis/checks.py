"""Argument checks shared by every analysis (one place for each rule and its message)."""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..engine import MAX_BINS

__all__ = [
    "EXCLUDE_SAME",
    "NORMALIZATION_MODES",
    "NORMS",
    "check_atomgroup",
    "check_exclude_same",
    "check_keywords",
    "check_nbins",
    "check_norm",
    "check_normalization_mode",
    "check_range",
    "is_updating",
]

#: Normalisations of the histograms.
NORMS = ("rdf", "density", "none")

#: ``normalization_mode`` values (freud's names): ``'exact'`` is MDAnalysis's normalisation,
#: ``'finite_size'`` rescales g(r) of a group with itself by N / (N - 1).
NORMALIZATION_MODES = ("exact", "finite_size")

#: ``exclude_same`` names and the AtomGroup attribute whose equal values exclude a pair.
EXCLUDE_SAME = {"residue": "resindices", "segment": "segindices", "chain": "chainIDs"}


def check_keywords(cls_name, kwargs):
    """TypeError for keyword arguments an analysis does not take.

    MDAnalysis's ``AnalysisBase`` swallows unknown keywords; here a typo such as
    ``exclude_slef=True`` must not pass silently."""
    unknown = sorted(k for k in kwargs if k != "verbose")
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise TypeError(
            f"{cls_name}() got unexpected keyword argument(s) {names}; see help({cls_name}) "
            "for the parameters it takes"
        )


def check_atomgroup(ag, name, *, updating=False):
    """TypeError/ValueError unless ``ag`` is a non-empty AtomGroup; an UpdatingAtomGroup only
    where the analysis accumulates its per-frame sizes (`updating`, InterRDF), and then it
    may be empty in the current frame."""
    from MDAnalysis.core.groups import AtomGroup, UpdatingAtomGroup

    if not isinstance(ag, AtomGroup):
        raise TypeError(f"{name} must be an MDAnalysis AtomGroup, got {type(ag).__name__}")
    if isinstance(ag, UpdatingAtomGroup):
        if updating:
            return
        raise ValueError(
            f"{name} is an UpdatingAtomGroup; its size changes between frames, which the "
            f"normalisation of this analysis cannot describe. Pass a static AtomGroup "
            f"(e.g. {name}.atoms), or use InterRDF, which accumulates the sizes of each frame."
        )
    if len(ag) == 0:
        raise ValueError(f"{name} is an empty AtomGroup: select at least one atom")


def is_updating(ag):
    """Whether `ag` is an UpdatingAtomGroup (its atoms are selected again in every frame)."""
    from MDAnalysis.core.groups import UpdatingAtomGroup

    return isinstance(ag, UpdatingAtomGroup)


def check_nbins(nbins, limit=MAX_BINS):
    """``nbins`` as an int: an integer from 1 to `limit` (None: no upper limit)."""
    if isinstance(nbins, bool) or not isinstance(nbins, numbers.Integral):
        raise TypeError(f"nbins must be an integer, got {nbins!r}")
    if nbins < 1:
        raise ValueError(f"nbins must be >= 1, got {nbins}")
    if limit is not None and nbins > limit:
        raise ValueError(
            f"nbins={nbins} is more than the {limit:,} bins the kernels take "
            f"(the counts alone would need {8 * nbins / 2**30:.2f} GiB per histogram)"
        )
    return int(nbins)


def check_range(rng):
    """``(rmin, rmax)`` as floats: finite, ``0 <= rmin < rmax``."""
    try:
        rmin, rmax = (float(v) for v in rng)
    except (TypeError, ValueError):
        raise ValueError(f"range must be a pair (rmin, rmax) of numbers, got {rng!r}") from None
    if not (np.isfinite(rmin) and np.isfinite(rmax)):
        raise ValueError(f"range must be finite, got {rng!r}")
    if rmin < 0:
        raise ValueError(f"range: rmin must be >= 0 (distances are never negative), got {rng!r}")
    if not rmax > rmin:
        raise ValueError(f"range must be increasing (rmin < rmax), got {rng!r}")
    return rmin, rmax


def check_norm(norm):
    """``norm`` lower-cased, one of :data:`NORMS` (MDAnalysis's message otherwise)."""
    norm = str(norm).lower()
    if norm not in NORMS:
        raise ValueError(f"'{norm}' is an invalid norm. Use 'rdf', 'density' or 'none'.")
    return norm


def check_exclude_same(exclude_same, cls_name="InterRDF"):
    """``exclude_same`` (None, 'residue', 'segment' or 'chain'), with MDAnalysis's message."""
    if exclude_same is not None and exclude_same not in EXCLUDE_SAME:
        raise ValueError(
            f"The exclude_same argument to {cls_name} must be None, 'residue', 'segment' "
            "or 'chain'."
        )
    return exclude_same


def check_normalization_mode(mode, norm, cls_name):
    """``normalization_mode`` (``'exact'`` or ``'finite_size'``); ``'finite_size'`` only
    rescales ``norm='rdf'``, so it is a ValueError with another `norm`."""
    if not isinstance(mode, str):
        raise TypeError(f"normalization_mode must be 'exact' or 'finite_size', got "
                        f"{type(mode).__name__} {mode!r}")
    key = mode.strip().lower()
    if key not in NORMALIZATION_MODES:
        raise ValueError(f"normalization_mode must be 'exact' or 'finite_size', got {mode!r}")
    if key == "finite_size" and norm != "rdf":
        raise ValueError(
            f"normalization_mode='finite_size' rescales g(r) (norm='rdf'); norm={norm!r} is "
            f"an absolute density or count with no reference to rescale. Use norm='rdf' or "
            f"normalization_mode='exact' in {cls_name}.")
    return key


def _user_stacklevel():
    """The stacklevel of a warning issued here that names the first caller outside this
    package and MDAnalysis (the line that called run())."""
    import inspect
    import os

    import MDAnalysis

    skip = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            os.path.dirname(os.path.abspath(MDAnalysis.__file__)))
    level = 1
    frame = inspect.currentframe().f_back  # the caller of this function: warn's level 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(skip):
        frame = frame.f_back
        level += 1
    return level


def deprecated_result(results, name, use, since="2.0.0"):
    """``results[use]``, with MDAnalysis's DeprecationWarning for the attribute `name` that
    InterRDF kept before its ``results``."""
    warnings.warn(
        f"The `{name}` attribute was deprecated in MDAnalysis {since} and will be removed "
        f"in MDAnalysis 3.0.0. Please use `results.{use}` instead",
        DeprecationWarning,
        stacklevel=3,
    )
    return results[use]
