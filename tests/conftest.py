"""Shared fixtures and independent NumPy reference implementations for the test suite.

Nothing in here imports :mod:`mdakit_fastrdf`: the references are written from the
definitions (minimum image convention, ``numpy.histogram`` binning, MDAnalysis'
exclusion rules) so that they can catch errors in the package.

Helpers are plain functions so test modules can import them with
``from conftest import ...``.

The tests sit in folders by layer (``kernels``, ``analysis``, ``backends``, ``gpu``,
``outputs``, ``packaging``), without ``__init__.py``: pytest imports each module under its
basename, so basenames must stay unique across the folders. :func:`_test_folders_on_path`
puts ``tests/`` (this file and the helper modules ``tables``, ``trajectories`` and
``stragglers``) and every folder on ``sys.path``, so that ``from conftest import ...``,
``from trajectories import ...`` and the few imports of another test module
(``from test_cuda import ...``) work whichever files a run selects.
"""

import glob
import os
import sys
import warnings

TESTS = os.path.dirname(os.path.abspath(__file__))
LAYERS = ("kernels", "analysis", "backends", "gpu", "outputs", "packaging")


def _test_folders_on_path():
    """``tests/`` and its layer folders on ``sys.path`` (after the current first entries)."""
    for d in (TESTS, *(os.path.join(TESTS, layer) for layer in LAYERS)):
        if d not in sys.path:
            sys.path.append(d)


_test_folders_on_path()


def _prefer_installed_package():
    """Test the installed package, not the bare source tree.

    ``python -m pytest`` puts the current directory (the repository root) first on
    ``sys.path``; the source tree's ``mdakit_fastrdf/`` has no compiled extension (it is
    built into the installed wheel), so importing it from there fails. When the source
    tree holds no compiled extension, drop the root from ``sys.path`` so that the
    installed package is imported.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(root, "mdakit_fastrdf")
    if "mdakit_fastrdf" in sys.modules:
        return
    if os.path.isdir(src) and not glob.glob(os.path.join(src, "engine", "_fastrdf_cpu*")):
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]


_prefer_installed_package()


def _require_module_under():
    """Fail the session unless the compiled module lies under ``$FASTRDF_REQUIRE_MODULE_UNDER``.

    tests/sanitize_cpu.sh sets it to the target directory of its ASan/UBSan build: the tests
    must import that instrumented module, not one from the source tree or from an installed
    or editable package (which would run uninstrumented and pass whatever the kernels do).
    The repository root is then always dropped from ``sys.path``.
    """
    want = os.environ.get("FASTRDF_REQUIRE_MODULE_UNDER")
    if not want:
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    from mdakit_fastrdf.engine import _fastrdf_cpu

    got = os.path.realpath(_fastrdf_cpu.__file__)
    if not got.startswith(os.path.realpath(want) + os.sep):
        raise RuntimeError(
            f"FASTRDF_REQUIRE_MODULE_UNDER={want}: the tests would import {got} instead"
        )


_require_module_under()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import MDAnalysis as mda  # noqa: E402
from MDAnalysis.coordinates.memory import MemoryReader  # noqa: E402

# --------------------------------------------------------------------------------------
# Hypothesis profiles
# --------------------------------------------------------------------------------------
# Chosen with the environment variable HYPOTHESIS_PROFILE:
#   dev       (the default) 30 examples per property test, no deadline (a frame's runtime
#             depends on what was drawn, so a deadline would only flake);
#   ci        the same counts, derandomised and without the example database: the same
#             examples on every run, nothing written to .hypothesis/;
#   thorough  ten times as many, for a longer local search:
#             HYPOTHESIS_PROFILE=thorough python -m pytest tests/analysis/test_slab.py
# ("default" is kept as another name of "dev".) A test that needs another count than the
# profile's asks for ``examples(n)``: n under the dev profile, scaled like the profile
# otherwise (tests/kernels/test_properties.py and tests/analysis/test_hostile.py).

DEFAULT_EXAMPLES = 30

try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - the docs/README tests run without hypothesis
    _hypothesis_settings = None
else:
    _hypothesis_settings.register_profile("dev", max_examples=DEFAULT_EXAMPLES, deadline=None)
    _hypothesis_settings.register_profile("default", _hypothesis_settings.get_profile("dev"))
    _hypothesis_settings.register_profile("ci", _hypothesis_settings.get_profile("dev"),
                                          derandomize=True, database=None)
    _hypothesis_settings.register_profile("thorough", max_examples=10 * DEFAULT_EXAMPLES,
                                          deadline=None)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def examples(n):
    """``n`` examples under the default profile, scaled like the loaded profile."""
    return max(1, n * _hypothesis_settings.default.max_examples // DEFAULT_EXAMPLES)

# --------------------------------------------------------------------------------------
# Box geometry
# --------------------------------------------------------------------------------------


def box_matrix(dims, dtype=np.float32):
    """Box vectors (rows a, b, c) for ``dims = [lx, ly, lz, alpha, beta, gamma]``.

    Computed in float64 with the standard formula (a along x, b in the xy plane), then
    rounded to ``dtype``. The default float32 is what MDAnalysis stores and hands to its
    distance kernels, so with float32-representable box vectors every integer lattice
    translation ``n . B`` is exact in float64 and the reference distances do not depend
    on the order in which the translation is added.
    """
    if np.shape(dims) == (3, 3):  # already box vectors (rows)
        return np.asarray(dims, dtype=np.float64).astype(dtype).astype(np.float64)
    lx, ly, lz, alpha, beta, gamma = (float(v) for v in np.asarray(dims, dtype=np.float64))
    m = np.zeros((3, 3), dtype=np.float64)
    if alpha == beta == gamma == 90.0:
        m[0, 0], m[1, 1], m[2, 2] = lx, ly, lz
        return m.astype(dtype).astype(np.float64)
    cos_a = 0.0 if alpha == 90.0 else np.cos(np.deg2rad(alpha))
    cos_b = 0.0 if beta == 90.0 else np.cos(np.deg2rad(beta))
    if gamma == 90.0:
        cos_g, sin_g = 0.0, 1.0
    else:
        g = np.deg2rad(gamma)
        cos_g, sin_g = np.cos(g), np.sin(g)
    m[0, 0] = lx
    m[1, 0] = ly * cos_g
    m[1, 1] = ly * sin_g
    m[2, 0] = lz * cos_b
    m[2, 1] = lz * (cos_a - cos_b * cos_g) / sin_g
    disc = lz * lz - m[2, 0] ** 2 - m[2, 1] ** 2
    assert disc > 0, f"invalid box {dims}"
    m[2, 2] = np.sqrt(disc)
    return m.astype(dtype).astype(np.float64)


def box_widths(dims):
    """Distances between opposite faces of the cell (float64)."""
    b = box_matrix(dims)
    vol = abs(np.linalg.det(b))
    return np.array(
        [vol / np.linalg.norm(np.cross(b[(k + 1) % 3], b[(k + 2) % 3])) for k in range(3)]
    )


def _lattice_translations(b, radius, kmin=2):
    """All lattice vectors ``n . B`` with ``|n . B| <= radius``, sorted by length.

    ``n`` is enumerated explicitly over ``{-K..K}^3``; ``K_k`` is at least ``kmin`` and
    large enough that no lattice vector shorter than ``radius`` is missed
    (``|n_k| <= |t| / w_k`` for a lattice vector ``t`` and face distance ``w_k``).
    """
    vol = abs(np.linalg.det(b))
    widths = [vol / np.linalg.norm(np.cross(b[(k + 1) % 3], b[(k + 2) % 3])) for k in range(3)]
    ks = [max(kmin, int(np.ceil(radius / w)) + 1) for w in widths]
    grids = np.meshgrid(*[np.arange(-k, k + 1) for k in ks], indexing="ij")
    n = np.stack([g.ravel() for g in grids], axis=1).astype(np.float64)
    t = n @ b  # exact: small integers times float32-representable entries
    norms = np.sqrt((t * t).sum(axis=1))
    keep = norms <= radius
    order = np.argsort(norms[keep], kind="stable")
    return t[keep][order], norms[keep][order]


def pair_distances(pos1, pos2, dims=None, rmax=np.inf, chunk_elems=1 << 18,
                   mda_ortho_bruteforce=False):
    """Float64 minimum-image distances between every ``pos1[i]`` and ``pos2[j]``.

    The difference vector is formed exactly as MDAnalysis (and the package) do it: a
    float32 subtraction of the float32 coordinates, widened to float64. With a box, the
    minimum image is found by brute force over lattice translations (no assumption on
    the skew of the cell): the vector is first reduced with fractional coordinates, then
    every lattice translation that could bring it within ``rmax`` is tried and the
    smallest squared norm ``x*x + y*y + z*z`` (that summation order) is kept.

    Distances above ``rmax`` may be returned as any value ``> rmax`` (they are not
    minimised further), which is all a histogram up to ``rmax`` needs.

    With ``mda_ortho_bruteforce`` and an orthorhombic box, the minimum image is instead
    computed with the arithmetic of MDAnalysis's brute-force distance code, which uses a
    float32 inverse box length (see :func:`mdanalysis_uses_bruteforce`).

    Returns an ``(n1, n2)`` float64 array.
    """
    p1 = np.ascontiguousarray(pos1, dtype=np.float32).reshape(-1, 3)
    p2 = np.ascontiguousarray(pos2, dtype=np.float32).reshape(-1, 3)
    n1, n2 = len(p1), len(p2)
    out = np.empty((n1, n2), dtype=np.float64)
    if n1 == 0 or n2 == 0:
        return out
    rows = max(1, chunk_elems // max(n2, 1))

    if dims is None:
        for i0 in range(0, n1, rows):
            d = (p2[None, :, :] - p1[i0:i0 + rows, None, :]).astype(np.float64)
            x, y, z = d[..., 0], d[..., 1], d[..., 2]
            out[i0:i0 + rows] = np.sqrt(x * x + y * y + z * z)
        return out

    if (mda_ortho_bruteforce and np.shape(dims) == (6,)
            and np.all(np.asarray(dims[3:], dtype=np.float64) == 90.0)):
        # MDAnalysis's brute-force orthorhombic minimum image: s = float32(1/L) * d,
        # d = L * (s - round(s)) with round half away from zero (C's round()).
        lengths = np.asarray(dims[:3], dtype=np.float32).astype(np.float64)
        inv32 = (1.0 / lengths).astype(np.float32).astype(np.float64)
        for i0 in range(0, n1, rows):
            d = (p2[None, :, :] - p1[i0:i0 + rows, None, :]).astype(np.float64)
            s = d * inv32
            t = np.trunc(s)
            frac = s - t
            rnd = np.where(frac >= 0.5, t + 1, np.where(frac <= -0.5, t - 1, t))
            d = lengths * (s - rnd)
            x, y, z = d[..., 0], d[..., 1], d[..., 2]
            out[i0:i0 + rows] = np.sqrt(x * x + y * y + z * z)
        return out

    b = box_matrix(dims)
    binv = np.linalg.inv(b)
    # |reduced vector| <= half the sum of the box vector lengths (|frac_k| <= 1/2).
    rad = 0.5 * np.linalg.norm(b, axis=1).sum() * (1 + 1e-9) + 1e-6
    r_lim = min(float(rmax), 1e300)
    trans, tnorm = _lattice_translations(b, r_lim + rad)
    for i0 in range(0, n1, rows):
        d = (p2[None, :, :] - p1[i0:i0 + rows, None, :]).astype(np.float64).reshape(-1, 3)
        nvec = np.rint(d @ binv)
        d = d - nvec @ b  # exact (see box_matrix); d is now in the centred cell
        dn = np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])
        best = np.full(len(d), np.inf)
        for t, tn in zip(trans, tnorm):
            # |d + t| >= |t| - |d|: skip translations that cannot beat the current best
            # (or that cannot bring the pair within rmax).
            lim = np.minimum(np.sqrt(best), r_lim)
            sel = np.nonzero(tn - dn <= lim * (1 + 1e-12) + 1e-12)[0]
            if sel.size == 0:
                continue
            v = d[sel] + t
            d2 = v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2]
            best[sel] = np.minimum(best[sel], d2)
        out[i0:i0 + rows] = np.sqrt(best).reshape(-1, n2)
    return out


def pair_mask(n1, n2, same=False, labels1=None, labels2=None, exclusion_block=None):
    """Boolean ``(n1, n2)`` mask of the pairs that are counted.

    * ``same``: drop the diagonal ``i == j`` (only meaningful when both groups are the
      same atoms; MDAnalysis itself does *not* do this, it counts self pairs at 0).
    * ``labels1/labels2``: drop pairs with equal labels (``exclude_same``).
    * ``exclusion_block=(a, b)``: drop pairs with ``i // a == j // b``.
    """
    mask = np.ones((n1, n2), dtype=bool)
    if same:
        assert n1 == n2
        np.fill_diagonal(mask, False)
    if labels1 is not None or labels2 is not None:
        l1 = np.asarray(labels1)
        l2 = np.asarray(labels2)
        mask &= l1[:, None] != l2[None, :]
    if exclusion_block is not None:
        a, b = exclusion_block
        mask &= (np.arange(n1)[:, None] // a) != (np.arange(n2)[None, :] // b)
    return mask


def mdanalysis_uses_bruteforce(n1, n2, rmax, dims):
    """Whether MDAnalysis's ``capped_distance`` (hence InterRDF) takes its brute-force path
    for a periodic box: a group of fewer than 10 atoms, or, below 1e8 pairs, ``rmax`` above
    0.3 times the box extent (see ``MDAnalysis.lib.distances._determine_method``). The
    package reproduces that path's arithmetic in double precision, so the reference must
    too."""
    if n1 < 10 or n2 < 10:
        return True
    if n1 * n2 >= 1e8:
        return False
    dims = np.asarray(dims, dtype=np.float32)
    if np.all(dims[3:] == 90.0):
        size = dims[:3]
    else:
        b = box_matrix(dims)
        size = b.max(axis=0) - b.min(axis=0)
    return bool(np.any(rmax > 0.3 * size))


def brute_force_counts(pos1, pos2, box_dims_or_None, edges, same=False, labels1=None,
                       labels2=None, exclusion_block=None, return_distances=False,
                       mdanalysis_path=True):
    """Independent float64 reference histogram of one frame.

    ``box_dims_or_None`` is ``None``, ``[lx, ly, lz, alpha, beta, gamma]`` or a (3, 3) array of
    box vectors (rows).

    ``np.histogram(d, bins=edges)`` of the minimum-image distances of all counted pairs
    (see :func:`pair_distances` and :func:`pair_mask`). With ``mdanalysis_path`` (for
    comparisons with InterRDF-level results) an orthorhombic box uses MDAnalysis's brute-force
    arithmetic where MDAnalysis would; kernel-level tests that ask for the exact orthorhombic
    kernel pass ``mdanalysis_path=False``. Returns int64 counts, and with
    ``return_distances=True`` also the 1-D array of counted distances (for the
    single-precision tolerance).
    """
    edges = np.asarray(edges, dtype=np.float64)
    brute = mdanalysis_path and box_dims_or_None is not None and mdanalysis_uses_bruteforce(
        len(np.reshape(pos1, (-1, 3))), len(np.reshape(pos2, (-1, 3))), edges[-1], box_dims_or_None)
    d = pair_distances(pos1, pos2, box_dims_or_None, rmax=edges[-1], mda_ortho_bruteforce=brute)
    mask = pair_mask(d.shape[0], d.shape[1], same, labels1, labels2, exclusion_block)
    dist = d[mask]
    counts, _ = np.histogram(dist, bins=edges)
    counts = counts.astype(np.int64)
    if return_distances:
        return counts, dist
    return counts


def near_edge_count(dist, edges, rel=1e-5):
    """Number of distances with ``|d - e| <= rel * max(1, e)`` for some edge ``e``.

    These are the only pairs a float32 distance computation may put in a neighbouring
    bin (or push across ``range[0]`` / ``range[1]``).
    """
    dist = np.asarray(dist, dtype=np.float64).ravel()
    edges = np.asarray(edges, dtype=np.float64)
    tol = rel * np.maximum(1.0, np.abs(edges))
    k = np.clip(np.searchsorted(edges, dist), 1, len(edges) - 1)
    lo = np.abs(dist - edges[k - 1]) <= tol[k - 1]
    hi = np.abs(dist - edges[k]) <= tol[k]
    return int(np.count_nonzero(lo | hi))


def assert_single_precision_close(counts, ref_counts, n_near_edge, context=""):
    """Float32 counts may differ from float64 only through pairs near a bin edge: each such
    pair moves one count out of one bin and (at most) into a neighbour, so the total
    absolute difference is bounded by twice the number of near-edge pairs."""
    counts = np.asarray(counts, dtype=np.int64)
    ref_counts = np.asarray(ref_counts, dtype=np.int64)
    diff = int(np.abs(counts - ref_counts).sum())
    assert diff <= 2 * n_near_edge, (
        f"{context}: single-precision counts differ by {diff} from the float64 reference, "
        f"but only {n_near_edge} pairs lie within float32 rounding of a bin edge; "
        f"bins differing: {np.nonzero(counts != ref_counts)[0].tolist()}"
    )


def reference_edges(nbins, rng_range):
    """Bin edges exactly as MDAnalysis/numpy build them."""
    return np.histogram([-1], bins=nbins, range=rng_range)[1]


def site_counts_reference(pos1, pos2, dims, rmin, rmax, nbins, mda_ortho_bruteforce=False,
                          return_distances=False, reach=None):
    """Float64 reference of one frame of InterRDF_s: ``(n1, n2, nbins)`` int64 counts.

    InterRDF_s does not bin with ``numpy.histogram``: it takes the pairs within ``rmax``
    (``d <= rmax``) and counts each in bin ``k = int((d - rmin) * nbins / (rmax - rmin))``
    (that expression, in float64, truncated toward zero) when ``0 <= k < nbins``. So a pair
    exactly at ``rmax`` is dropped and one up to a bin width below ``rmin`` lands in bin 0.
    Distances from :func:`pair_distances`. With ``return_distances`` also returns them
    (``(n1, n2)``), exact up to ``max(rmax, reach)`` and any larger value beyond.
    """
    p1 = np.asarray(pos1, dtype=np.float32).reshape(-1, 3)
    p2 = np.asarray(pos2, dtype=np.float32).reshape(-1, 3)
    d = pair_distances(p1, p2, dims, rmax=max(rmax, reach or rmax),
                       mda_ortho_bruteforce=mda_ortho_bruteforce)
    counts = np.zeros((len(p1), len(p2), nbins), dtype=np.int64)
    ok = d <= rmax
    k = np.full(d.shape, -1, dtype=np.int64)
    k[ok] = np.trunc((d[ok] - rmin) * nbins / (rmax - rmin)).astype(np.int64)
    ok &= (k >= 0) & (k < nbins)
    i, j = np.nonzero(ok)
    counts[i, j, k[ok]] = 1
    if return_distances:
        return counts, d
    return counts


# --------------------------------------------------------------------------------------
# In-memory universes
# --------------------------------------------------------------------------------------


def make_universe(coords, dimensions=None, atoms_per_residue=1, residues_per_segment=None,
                  chain_ids=None, names=None):
    """An in-memory Universe from ``(n_frames, n_atoms, 3)`` (or ``(n_atoms, 3)``) coords.

    * ``dimensions``: ``None`` (no box), a ``(6,)`` box or an ``(n_frames, 6)`` array.
    * atoms are grouped into residues of ``atoms_per_residue`` consecutive atoms (the last
      one may be shorter), residues into segments of ``residues_per_segment`` residues
      (default: one segment);
    * ``chain_ids``: per-atom chain IDs (default: 'A' for every atom);
    * ``names``: per-atom names (default: 'X').
    """
    coords = np.asarray(coords, dtype=np.float32)
    if coords.ndim == 2:
        coords = coords[None]
    n_frames, n_atoms, _ = coords.shape
    atom_resindex = np.arange(n_atoms) // atoms_per_residue
    n_residues = int(atom_resindex[-1]) + 1 if n_atoms else 1
    if residues_per_segment is None:
        residue_segindex = np.zeros(n_residues, dtype=int)
    else:
        residue_segindex = np.arange(n_residues) // residues_per_segment
    n_segments = int(residue_segindex.max()) + 1
    u = mda.Universe.empty(
        n_atoms,
        n_residues=n_residues,
        n_segments=n_segments,
        atom_resindex=atom_resindex,
        residue_segindex=residue_segindex,
        trajectory=True,
    )
    u.add_TopologyAttr("names", list(names) if names is not None else ["X"] * n_atoms)
    u.add_TopologyAttr("resnames", ["RES"] * n_residues)
    u.add_TopologyAttr("resids", np.arange(1, n_residues + 1))
    u.add_TopologyAttr("segids", [f"S{i}" for i in range(n_segments)])
    u.add_TopologyAttr(
        "chainIDs", list(chain_ids) if chain_ids is not None else ["A"] * n_atoms
    )
    if dimensions is not None:
        dimensions = np.asarray(dimensions, dtype=np.float32)
        if dimensions.ndim == 1:
            dimensions = np.tile(dimensions, (n_frames, 1))
    u.load_new(coords, format=MemoryReader, dimensions=dimensions, dt=1.0)
    return u


def random_positions_in_box(rng, n, dims, n_frames=1):
    """Float32 positions uniformly inside the primary cell of ``dims``.

    Fractional coordinates in [0, 1) are mapped through the box matrix and rounded to
    float32; then MDAnalysis' own wrapping (``apply_PBC``, float32, as its distance
    kernels do) is applied so the positions are exactly where MDAnalysis and a faithful
    re-implementation would put them: wrapping them again is a no-op (asserted).
    """
    from MDAnalysis.lib.distances import apply_PBC

    b = box_matrix(dims)
    out = np.empty((n_frames, n, 3), dtype=np.float32)
    for f in range(n_frames):
        frac = rng.random((n, 3))
        pos = (frac @ b).astype(np.float32)
        pos = apply_PBC(pos, np.asarray(dims, dtype=np.float32))
        again = apply_PBC(pos.copy(), np.asarray(dims, dtype=np.float32))
        assert np.array_equal(pos, again)
        out[f] = pos
    return out


# --------------------------------------------------------------------------------------
# MDAnalysisTests data
# --------------------------------------------------------------------------------------


def datafile(*names):
    """Paths of MDAnalysisTests data files, or skip the test if any is unavailable."""
    try:
        import MDAnalysisTests.datafiles as D
    except ImportError:  # pragma: no cover
        pytest.skip("MDAnalysisTests is not installed")
    paths = []
    for n in names:
        p = getattr(D, n, None)
        if p is None or not os.path.exists(p):
            pytest.skip(f"MDAnalysisTests data file {n} is not available")
        paths.append(p)
    return paths


def load_universe(*names):
    paths = datafile(*names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mda.Universe(*paths)


_SHARED_UNIVERSES = {}


def shared_universe(*names):
    """One Universe per set of MDAnalysisTests files for the whole session (skips like
    :func:`load_universe`). For tests that only read it: select, run analyses, seek frames.
    A test that changes its Universe (transformations, guessed or added attributes, a box
    set by hand, a wrapped reader) loads its own (``fresh_adk_water``, ``fresh_adk_vacuum``,
    :func:`load_universe`)."""
    if names not in _SHARED_UNIVERSES:
        _SHARED_UNIVERSES[names] = load_universe(*names)
    return _SHARED_UNIVERSES[names]


# The adk systems of MDAnalysisTests, loaded once: every test module that reads one asks
# for these fixtures.

@pytest.fixture(scope="session")
def adk_water():
    """TPR/XTC: adenylate kinase in water, triclinic (rhombic dodecahedron) box."""
    return shared_universe("TPR", "XTC")


@pytest.fixture(scope="session")
def adk_vacuum():
    """PSF/DCD: adenylate kinase in vacuum, no box, no elements, 98 frames."""
    return shared_universe("PSF", "DCD")


@pytest.fixture
def fresh_adk_water():
    """TPR/XTC loaded for this test alone: for a test that changes the Universe."""
    return load_universe("TPR", "XTC")


@pytest.fixture
def fresh_adk_vacuum():
    """PSF/DCD loaded for this test alone: for a test that changes the Universe."""
    return load_universe("PSF", "DCD")


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


@pytest.fixture(scope="session")
def small_periodic_universe():
    """Small random periodic system: 240 atoms in 60 residues (4 atoms each),
    4 segments, ortho 25 A box, 4 frames with slightly different boxes."""
    r = np.random.default_rng(7)
    n_frames, n = 4, 240
    dims = np.array([[25.0 + 0.5 * f, 25.0, 26.0, 90, 90, 90] for f in range(n_frames)])
    coords = np.stack(
        [random_positions_in_box(r, n, dims[f])[0] for f in range(n_frames)]
    )
    chains = np.array(["A", "B", "C"])[np.arange(n) % 3]
    return make_universe(coords, dims, atoms_per_residue=4, residues_per_segment=15,
                         chain_ids=chains)


# --------------------------------------------------------------------------------------
# GPUs
# --------------------------------------------------------------------------------------


def _gpu_unavailable_reason():
    """Why GPU tests must skip, or None. Asked in a child process, so that this (parent)
    process never initialises CUDA before tests that fork workers."""
    import subprocess

    try:
        from mdakit_fastrdf.engine import _cuda_module
    except ImportError:
        return "mdakit_fastrdf is not importable"
    if _cuda_module() is None:
        return "this build has no CUDA kernels"
    code = ("from mdakit_fastrdf.engine import cuda_unavailable_reason as r; "
            "print(r() or 'OK')")
    import tempfile

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=300, cwd=tempfile.gettempdir(), env=env)
    except subprocess.TimeoutExpired:  # pragma: no cover
        return "asking for CUDA devices timed out"
    answer = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr.strip()
    return None if answer == "OK" else answer


GPU_UNAVAILABLE = _gpu_unavailable_reason()
requires_gpu = pytest.mark.skipif(GPU_UNAVAILABLE is not None,
                                  reason=f"needs a CUDA GPU: {GPU_UNAVAILABLE}")


# --------------------------------------------------------------------------------------
# Single precision: which pairs may land in another bin, and a check that only they did
# --------------------------------------------------------------------------------------


def float32_distance_tolerance(dims, coords=None, rmax=0.0):
    """Absolute bound on the error of a float32 minimum-image distance.

    The kernels take the float32 coordinate difference exactly as the float64 reference
    does; what float32 adds is the rounding of the lattice translation (``n * L``,
    ``nint(f . d)``), of the squares and sum and of the square root: a few float32 ulps of
    the largest magnitude involved, i.e. of the separation, the box vectors and the
    coordinates. ``2^-19`` (about 8 ulp) of their sum is a safe margin.
    """
    scale = 1.0 + float(rmax)
    if dims is not None:
        scale += 2.0 * float(np.linalg.norm(box_matrix(dims), axis=1).sum())
    if coords is not None and len(coords):
        scale += float(np.abs(np.asarray(coords, dtype=np.float64)).max())
    return scale * 2.0 ** -19


def assert_only_near_edge_pairs_moved(counts, ref_counts, dist, edges, tol, context=""):
    """Single-precision counts versus the float64 reference, pair by pair in effect.

    ``dist`` holds the float64 distance of every counted pair (beyond ``edges[-1]`` too,
    as far as they are within ``tol`` of it). A pair within ``tol`` of edge ``e_k`` may have
    crossed that edge (one bin up or down, or in or out of the range at ``e_0``/``e_n``);
    no other pair may have moved. Writing ``f_k`` for the net number of pairs that crossed
    edge ``k`` upwards, the difference in bin ``k`` is ``f_k - f_{k+1}``, so the flows are
    fixed by the differences up to ``f_0``; the check is that some ``f_0`` makes every
    ``f_k`` lie between minus the near-edge pairs just above ``e_k`` and plus those just
    below it. (This is stronger than a bound on the total difference: a count that
    vanished from one bin and reappeared two bins away, or one that moved where no pair was
    near an edge, fails.)
    """
    counts = np.asarray(counts, dtype=np.int64).ravel()
    ref_counts = np.asarray(ref_counts, dtype=np.int64).ravel()
    edges = np.asarray(edges, dtype=np.float64)
    dist = np.asarray(dist, dtype=np.float64).ravel()
    nb = len(edges) - 1
    assert counts.shape == ref_counts.shape == (nb,)
    diff = counts - ref_counts
    if not diff.any():
        return
    # below[k]: pairs within tol of edge k on its lower side (d < e_k), above[k]: d >= e_k.
    below = np.array([np.count_nonzero((dist < e) & (dist >= e - tol)) for e in edges])
    above = np.array([np.count_nonzero((dist >= e) & (dist <= e + tol)) for e in edges])
    # f_k = f_0 - c_k with c_0 = 0, c_k = sum(diff[:k]); need -above_k <= f_k <= below_k.
    c = np.concatenate([[0], np.cumsum(diff)])
    lo = np.max(-above + c)
    hi = np.min(below + c)
    assert lo <= hi, (
        f"{context}: single-precision counts differ from the float64 reference in bins "
        f"{np.nonzero(diff)[0].tolist()} (differences {diff[diff != 0].tolist()}) in a way that "
        f"pairs within float32 rounding ({tol:.3g}) of an edge cannot explain "
        f"(near-edge pairs below/above each edge: {below.tolist()} / {above.tolist()})"
    )
