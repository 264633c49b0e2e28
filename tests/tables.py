"""Parameter tables that several test modules share.

Not in conftest.py, whose helpers are reference implementations and fixtures; plain data
here, imported with ``from tables import ...`` (pytest puts ``tests/`` on ``sys.path``).
"""

import numpy as np

# Cells of the analyses that take distances in a 2D lattice (LateralRDF, its slab mode and
# CylindricalRDF): the in-plane lattice is a rectangle, a hexagon, or the a-b plane of a cell
# whose c vector leans out of the z axis.
LATTICE_BOXES = {
    "ortho": np.array([21.0, 23.0, 30.0, 90, 90, 90]),
    "hexagonal": np.array([22.0, 22.0, 30.0, 90, 90, 120]),  # the membrane systems' kind
    "tilted": np.array([22.0, 24.0, 28.0, 70, 80, 95]),  # c out of the z axis
}
# c along z, a and b oblique: CylindricalRDF takes it where it refuses "tilted".
OBLIQUE_BOX = np.array([22.0, 24.0, 28.0, 90, 90, 75])

# Launch shapes of the CUDA histogram kernels: the keywords of the engine's CUDA options
# ("third": a window of a third of the bins, at least 2).
GPU_LAUNCHES = {
    "auto": {},
    "threads-1024": {"threads": "1024"},
    "sweeps": {"kernel": "shared", "max_window_bins": "third"},
    "packed": {"kernel": "packed"},
    "packed-sweeps": {"kernel": "packed", "max_window_bins": "third"},
    "global": {"kernel": "global"},
    "cells": {"method": "cells"},
}
