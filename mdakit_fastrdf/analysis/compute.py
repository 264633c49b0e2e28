"""How an analysis computes: the device, the precision, the threads and the kernel method, as
one bundle.

Every analysis takes these four keywords (``device=``, ``precision=``, ``n_threads=``,
``method=``), or the same as one :class:`ComputeOptions` (``compute=``), which a script can
build once and hand to several analyses. The base's constructor takes them out of the
keywords a subclass did not name (:meth:`ComputeOptions.take`), so a subclass's ``__init__``
neither names nor forwards them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..engine import validate_device, validate_method, validate_n_threads, validate_precision

__all__ = ["COMPUTE_KEYWORDS", "ComputeOptions"]

#: The keywords of :class:`ComputeOptions`, in the order of the docs.
COMPUTE_KEYWORDS = ("device", "precision", "n_threads", "method")


@dataclass(frozen=True)
class ComputeOptions:
    """Where and how an analysis computes its histograms.

    Parameters
    ----------
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}, optional
        ``'auto'`` (default) runs on a GPU when one is usable and the frame has enough pairs
        to pay for it, else on the CPU; ``'cuda'`` asks for a GPU (an error if there is none).
    precision : {'double', 'single'}, optional
        Distances in float64 (default, InterRDF's bins) or float32 arithmetic.
    n_threads : int, optional
        CPU threads of the kernels (default: the cores this process may use).
    method : {'auto', 'allpairs', 'cells'}, optional
        All pairs, cell lists, or the faster of the two for the frame (default).

    Examples
    --------
    >>> from mdakit_fastrdf import ComputeOptions, InterRDF, SpeciesRDF
    >>> cpu2 = ComputeOptions(device="cpu", n_threads=2)
    >>> rdf = InterRDF(g1, g2, compute=cpu2)          # doctest: +SKIP
    >>> partials = SpeciesRDF(u.atoms, compute=cpu2)  # doctest: +SKIP
    """

    device: str = "auto"
    precision: str = "double"
    n_threads: int | None = None
    method: str = "auto"

    def __post_init__(self):
        for name, check in (("device", validate_device), ("precision", validate_precision),
                            ("n_threads", validate_n_threads), ("method", validate_method)):
            object.__setattr__(self, name, check(getattr(self, name)))

    @classmethod
    def take(cls, kwargs: dict, owner: str, keywords=COMPUTE_KEYWORDS) -> "ComputeOptions":
        """Remove ``compute=`` and the compute keywords an analysis takes (`keywords`) from
        `kwargs` and return them checked, as one :class:`ComputeOptions`.

        A keyword the analysis does not take stays in `kwargs` (the base's keyword check then
        names it). ``compute=`` together with one of the single keywords is a TypeError: the
        two would disagree."""
        given = {k: kwargs.pop(k) for k in keywords if k in kwargs}
        bundle = kwargs.pop("compute", None)
        if bundle is None:
            return cls(**given)
        if not isinstance(bundle, cls):
            raise TypeError(f"{owner}(compute=...) must be a ComputeOptions, got "
                            f"{type(bundle).__name__}")
        if given:
            raise TypeError(f"{owner}() got compute= and {', '.join(map(repr, given))}: give "
                            "the options in one place")
        ignored = [f.name for f in fields(cls) if f.name not in keywords
                   and getattr(bundle, f.name) != f.default]
        if ignored:
            raise ValueError(f"{owner} does not take {', '.join(map(repr, ignored))}: leave "
                             "them at their defaults in compute=")
        return bundle
