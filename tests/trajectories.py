"""Trajectories written in the tests: in-memory Universes, and Brownian particles, whose
dynamics have analytic answers (the dynamics tests' references)."""

import MDAnalysis as mda
import numpy as np
from MDAnalysis.coordinates.memory import MemoryReader


def memory_universe(positions, dims, elements=None, dt=1.0):
    """A Universe of the ``(frames, n, 3)`` `positions` (float32 in memory), boxes `dims`
    (one, or one per frame), frames `dt` ps apart."""
    n = positions.shape[1]
    u = mda.Universe.empty(n, trajectory=True)
    if elements is not None:
        u.add_TopologyAttr("elements", list(elements))
    u.load_new(np.asarray(positions, dtype=np.float32), format=MemoryReader,
               dimensions=np.asarray(dims, dtype=np.float64), dt=dt)
    return u


def brownian_positions(n=1000, frames=120, box=30.0, D=0.05, dt=1.0, seed=0):
    """Unwrapped positions ``(frames, n, 3)`` (float64) of independent Brownian particles of
    diffusion coefficient `D` (Å²/ps), uniform in a cubic box at the first frame."""
    rng = np.random.default_rng(seed)
    return rng.random((1, n, 3)) * box + np.cumsum(
        rng.normal(0.0, np.sqrt(2 * D * dt), (frames, n, 3)), axis=0)


def brownian(n=1000, frames=120, box=30.0, D=0.05, dt=1.0, seed=0):
    """Brownian particles (:func:`brownian_positions`) wrapped into their cubic box, half of
    them oxygens and half hydrogens."""
    x = brownian_positions(n, frames, box, D, dt, seed)
    return memory_universe(np.mod(x, box), [box, box, box, 90, 90, 90],
                           ["O"] * (n // 2) + ["H"] * (n - n // 2), dt=dt)
