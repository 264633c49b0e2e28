"""The command-line declaration of :class:`~mdakit_fastrdf.StructureFactor`
(``mdakit-fastrdf sq``): its options and printed summary."""

from __future__ import annotations

import numpy as np

from .declarations import Command, Option

__all__ = ["SQ_COMMAND"]


def _summary(sf):
    """The command line's summary lines of a StructureFactor run."""
    res = sf.results
    q_min = 2.0 * np.pi / sf.rdf_settings["range"][1]  # beyond the box-scale rise at small q
    # NaN: a q bin of the direct sum without a reciprocal vector of the box (below 2π/L)
    finite = np.flatnonzero(np.isfinite(res.s))
    above = finite[res.q[finite] > q_min]
    if above.size:
        k = above[int(np.argmax(res.s[above]))]
        text = (f"S = {res.s[k]:.4g} at q = {res.q[k]:.3g} 1/Å "
                f"(largest S above 2π/r_max = {q_min:.3g} 1/Å)")
    else:
        text = f"none: no finite S(q) above 2π/r_max = {q_min:.3g} 1/Å"
    if finite.size:
        low = finite[0]
        text += f"; S = {res.s[low]:.4g} at q = {res.q[low]:.3g} 1/Å"
        if low > 0:
            text += " (the lowest q with reciprocal vectors of the box)"
    lines = [("Main peak", text)]
    qc = res.get("q_crossover")
    if qc is not None and np.isfinite(qc):
        lines.append(("Crossover", f"direct k-space sum below q = {float(qc):.3g} 1/Å"))
    return lines


SQ_COMMAND = Command(
    name="sq",
    help="structure factors S(q) of a periodic system (Faber-Ziman partials and total)",
    select="name OW",
    demo=("TPR", "XTC"),
    guess_elements=True,
    options=(
        Option(("--by",), "by", {"help": "species: element (default), name, type, ..."}),
        Option(("--nbins",), "nbins", {"type": int, "help": "r bins (default: 1500)"}),
        Option(("--range",), "range", {"nargs": 2, "type": float,
                                        "metavar": ("RMIN", "RMAX"),
                                        "help": "r range in Å (default: 0 15)"},
               convert=tuple),
        Option(("--qbins",), "qbins", {"type": int, "help": "q bins (default: 200)"}),
        Option(("--q-range",), "q_range", {"nargs": 2, "type": float,
                                            "metavar": ("QMIN", "QMAX"),
                                            "help": "q range in 1/Å (default: 0 10)"},
               convert=tuple),
        Option(("--weights",), "weights", {"choices": ("number", "xray", "neutron"),
                                            "help": "weights of the total S(q) "
                                                    "(default: number)"}),
        Option(("--window",), "window", {"choices": ("cosine", "lorch", "none"),
                                          "help": "window of the transform "
                                                  "(default: cosine)"},
               convert=lambda v: None if v == "none" else v),
        Option(("--taper-width",), "taper_width", {"type": float, "metavar": "W",
                                                    "help": "taper of --window cosine "
                                                            "over [r_max - W, r_max] in "
                                                            "Å (default: r_max / 2)"}),
        Option(("--q-crossover",), "q_crossover", {"metavar": "Q",
                                                    "help": "below Q (1/Å) S(q) from the "
                                                            "direct k-space sum; 'auto' "
                                                            "(default) or 'none'"},
               convert=lambda v: v if v == "auto" else None if v == "none" else float(v)),
    ),
    summary=lambda sf: _summary(sf),
)
