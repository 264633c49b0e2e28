"""How a frame's positions are prepared for the kernels.

Three modes, chosen by an analysis (:attr:`PairHistogramBase.coordinates`):

``'mdanalysis'``
    exactly as MDAnalysis's ``capped_distance`` prepares them for the pair of groups, so that
    the distances (and so the counts of ``InterRDF`` and ``InterRDF_s``) are MDAnalysis's;
``'wrapped'``
    wrapped into the primary cell in float32 when there is a box (``SpeciesRDF``);
``'as_is'``
    the positions as the trajectory gives them.
"""

from __future__ import annotations

import numpy as np

from ..engine import NO_BOX, ORTHO, ORTHO_SCALED, Box, wrap_positions

__all__ = ["COORDINATE_MODES", "mdanalysis_compat", "mdanalysis_uses_grid", "prepare_coordinates"]

COORDINATE_MODES = ("mdanalysis", "wrapped", "as_is")


def mdanalysis_uses_grid(n1, n2, rmax, box: Box, coords) -> bool:
    """Whether MDAnalysis's ``capped_distance`` takes its grid search (else brute force) for
    groups of ``n1`` and ``n2`` atoms (``_determine_method``); ``coords``: both groups'
    positions (only used without a box)."""
    if n1 < 10 or n2 < 10:
        return False
    if n1 * n2 >= 1e8:
        return True
    if box.kind == NO_BOX:
        size = coords.max(axis=0) - coords.min(axis=0)
    elif box.kind == ORTHO:
        size = np.diag(box.vectors32)
    else:
        size = box.vectors32.max(axis=0) - box.vectors32.min(axis=0)
    return not np.any(rmax > 0.3 * size)


def mdanalysis_compat(box: Box, coords, n1, n2, rmax) -> Box:
    """Prepare ``coords`` (in place) and the box as MDAnalysis's capped_distance would.

    ``coords`` holds the positions of both groups (``n1`` then ``n2`` atoms, or only one group
    when it is used with itself). InterRDF's distances come from ``capped_distance``, which
    picks a grid search or brute force from the sizes (``_determine_method``). The grid search
    wraps positions into the box in float32 (without a box it shifts them by their minimum);
    brute force wraps them only for triclinic boxes and, for orthorhombic ones, takes the
    minimum image with a float32 inverse box length. Doing the same operations gives the same
    distances. Returns the box the kernel must use.
    """
    grid = mdanalysis_uses_grid(n1, n2, rmax, box, coords)
    if box.kind == NO_BOX:
        if grid:
            lmin = coords.min(axis=0)
            coords -= lmin - 0.1 * rmax
        return box
    if box.kind == ORTHO and not grid:
        return Box(ORTHO_SCALED, box.vectors32)
    wrap_positions(coords, box)
    return box


def prepare_coordinates(mode, box: Box, coords, sizes, rmax) -> Box:
    """Prepare ``coords`` (float32, in place) for the kernels in `mode` and return the box
    the kernels use. ``sizes``: ``(n1, n2)`` of the pair of groups (``'mdanalysis'``)."""
    if mode == "mdanalysis":
        return mdanalysis_compat(box, coords, sizes[0], sizes[1], rmax)
    if mode == "wrapped" and box.kind != NO_BOX:
        wrap_positions(coords, box)
    return box
