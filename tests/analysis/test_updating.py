"""InterRDF with UpdatingAtomGroups (selections evaluated again in every frame).

The counts must equal those of running InterRDF frame by frame on the atoms each selection
holds in that frame and summing; the normalisation divides by the frame-averaged
N_A N_B (less the excluded pairs of each frame) and the frame-averaged volume, which is
MDAnalysis's own normalisation when the selection does not change. References: per-frame
static runs (the kernel on fixed groups, checked against MDAnalysis elsewhere) and a NumPy
float64 brute force of the frame's selected atoms.
"""

import warnings

import numpy as np
import pytest
from conftest import (
    brute_force_counts,
    make_universe,
    random_positions_in_box,
    requires_gpu,
)

from mdakit_fastrdf import InterRDF

BOX = np.array([18.0, 19.0, 20.0, 90.0, 90.0, 90.0])
SEL = "prop x < 9"  # about half the atoms, a different half in every frame


R = {"range": (0.0, 9.0), "nbins": 45}  # within half the smallest width of BOX


def _universe(n=90, n_frames=6, dims=BOX, seed=3):
    rng = np.random.default_rng(seed)
    coords = random_positions_in_box(rng, n, dims, n_frames=n_frames)
    names = ["O" if i % 3 == 0 else "H" for i in range(n)]
    return make_universe(coords, dims, atoms_per_residue=3, names=names)


def _per_frame_static(u, sel1, sel2, **kw):
    """Counts summed over InterRDF runs of one frame each, on the static selection of that
    frame, and the sums of N_A, N_B, N_A N_B and the volume."""
    total, sizes, volume = None, np.zeros(3), 0.0
    for f in range(u.trajectory.n_frames):
        u.trajectory[f]
        a = u.select_atoms(sel1)
        b = a if sel2 is None else u.select_atoms(sel2)
        sizes += (len(a), len(b), len(a) * len(b))
        volume += u.trajectory.ts.volume
        if len(a) and len(b):
            c = InterRDF(a, b, **kw).run(start=f, stop=f + 1).results.count
            total = c if total is None else total + c
    return total, sizes, volume


@pytest.mark.parametrize("same", [False, True], ids=["two-groups", "one-group"])
@pytest.mark.parametrize("kw", [R, {**R, "exclude_same": "residue"}, {"range": (1.5, 8.0), "nbins": 30},
                                {**R, "norm": "density"}],
                         ids=["default", "exclude_same", "offset", "density"])
def test_counts_equal_the_frames_run_one_by_one(same, kw):
    u = _universe()
    g1 = u.select_atoms(SEL, updating=True)
    g2 = g1 if same else u.atoms
    sel2 = None if same else "all"
    r = InterRDF(g1, g2, **kw).run()
    ref, sizes, volume = _per_frame_static(u, SEL, sel2, **kw)
    np.testing.assert_array_equal(r.results.count, ref)
    n_frames = u.trajectory.n_frames
    assert r.results.n_pairs == sizes[2] / n_frames
    np.testing.assert_allclose(r.results.coordination,
                               np.cumsum(ref) / n_frames / (sizes[0] / n_frames), rtol=1e-13)
    # the normalisation, written out: count / (<N_A N_B> shell n_frames / <V>)
    e = r.results.edges
    shell = 4.0 / 3.0 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
    if kw.get("norm", "rdf") == "rdf":
        expected = ref / (sizes[2] / n_frames / (volume / n_frames) * shell * n_frames)
        np.testing.assert_allclose(r.results.rdf, expected, rtol=1e-13)
        np.testing.assert_allclose(r.results.rho, sizes[:2] / volume, rtol=1e-13)


def test_counts_against_a_float64_brute_force():
    """The counts of each frame are those of a float64 minimum-image brute force over the
    atoms the selections hold in that frame (independent of the package's kernels)."""
    u = _universe()
    g1 = u.select_atoms(SEL, updating=True)
    g2 = u.select_atoms("name O", updating=True)
    r = InterRDF(g1, g2, nbins=40, range=(0.0, 9.0), precision="double").run()
    total = np.zeros(40, dtype=np.int64)
    for f in range(u.trajectory.n_frames):
        u.trajectory[f]
        a, b = u.select_atoms(SEL), u.select_atoms("name O")
        total += brute_force_counts(a.positions, b.positions, BOX, r.results.edges,
                                    mdanalysis_path=False)
    np.testing.assert_array_equal(r.results.count_uint64.astype(np.int64), total)


def test_a_selection_that_never_changes_gives_the_static_results():
    """An UpdatingAtomGroup that selects the same atoms in every frame: the results of the
    static group, bit for bit (MDAnalysis's normalisation is the static limit)."""
    u = _universe()
    static = InterRDF(u.select_atoms("name O"), u.atoms, **R).run().results
    upd = InterRDF(u.select_atoms("name O", updating=True), u.atoms, **R).run().results
    for key in ("count", "rdf", "cdf", "coordination", "rho", "n_pairs"):
        np.testing.assert_array_equal(upd[key], static[key], err_msg=key)


def test_backends_and_blocks_give_the_same_numbers():
    u = _universe(n_frames=8)
    make = lambda: InterRDF(u.select_atoms(SEL, updating=True), u.atoms, **R)
    serial = make().run().results
    for kw in ({"backend": "multiprocessing", "n_workers": 2}, {"backend": "node", "n_workers": 2}):
        other = make().run(**kw).results
        np.testing.assert_array_equal(other.count, serial.count)
        np.testing.assert_array_equal(other.rdf, serial.rdf)
    blocks = make().run(blocks=4).results
    np.testing.assert_array_equal(blocks.count, serial.count)
    np.testing.assert_array_equal(blocks.rdf, serial.rdf)
    # each block is normalised by its own frames' sizes: block b is the run over its frames
    for b in range(4):
        part = make().run(start=2 * b, stop=2 * b + 2).results
        np.testing.assert_allclose(blocks.block_rdf[b], part.rdf, rtol=1e-13)


def test_exclusion_block_follows_each_frame():
    """exclusion_block (1, 1) with one updating group leaves each atom's pair with itself out
    in every frame, and N_pairs loses the frame's N; blocks that stop dividing a frame's
    group sizes are an error naming the frame."""
    u = _universe()
    g = u.select_atoms(SEL, updating=True)
    r = InterRDF(g, g, exclusion_block=(1, 1), **R).run()
    ref, sizes, _ = _per_frame_static(u, SEL, None, exclusion_block=(1, 1), **R)
    np.testing.assert_array_equal(r.results.count, ref)
    assert r.results.n_pairs == (sizes[2] - sizes[0]) / u.trajectory.n_frames
    with pytest.raises(ValueError, match=r"exclusion_block=\(3, 3\).*in frame \d+ \(the groups are updating\)"):
        InterRDF(g, g, exclusion_block=(3, 3), **R).run()


def test_a_frame_without_atoms_counts_nothing():
    u = _universe()
    g1 = u.select_atoms("prop x < 0.5", updating=True)  # empty in some frames
    sizes = []
    for f in range(u.trajectory.n_frames):
        u.trajectory[f]
        sizes.append(len(g1))
    assert 0 in sizes and max(sizes) > 0
    r = InterRDF(g1, u.atoms, **R).run()
    ref, _, _ = _per_frame_static(u, "prop x < 0.5", "all", **R)
    np.testing.assert_array_equal(r.results.count, ref)


def test_what_cannot_be_combined_with_updating_groups():
    u = _universe()
    g = u.select_atoms(SEL, updating=True)
    with pytest.raises(ValueError, match="compound=.*UpdatingAtomGroup"):
        InterRDF(g, u.atoms, compound="residues", unwrap=False)
    with pytest.raises(ValueError, match="finite_size.*UpdatingAtomGroup"):
        InterRDF(g, g, normalization_mode="finite_size")


def test_adk_water_around_the_protein(adk_water):
    """The use that motivates it: water oxygens within 6 Å of the protein (a different set in
    every frame of the adk trajectory) against all water oxygens."""
    u = adk_water
    g1 = u.select_atoms("name OW and around 6 protein", updating=True)
    ow = u.select_atoms("name OW")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = InterRDF(g1, ow, range=(0.0, 10.0), nbins=50).run(stop=4)
    ref4 = np.zeros(50)
    for f in range(4):
        u.trajectory[f]
        a = u.select_atoms("name OW and around 6 protein")
        ref4 += InterRDF(a, ow, range=(0.0, 10.0), nbins=50).run(start=f, stop=f + 1).results.count
    np.testing.assert_array_equal(r.results.count, ref4)
    assert len(set(r.results.frame_group_sizes[:, 0])) > 1  # the selection did change


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("precision", ["double", "single"])
def test_gpu_gives_the_cpu_counts(precision, adk_water):
    """On the GPU (a new atom set every frame: the engine plans each frame again) the counts
    of the CPU, bit for bit, in both precisions."""
    u = adk_water
    g1 = u.select_atoms("name OW and around 6 protein", updating=True)
    ow = u.select_atoms("name OW")
    kw = dict(range=(0.0, 10.0), nbins=200, precision=precision)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpu = InterRDF(g1, ow, device="cuda", **kw).run(stop=5).results
        cpu = InterRDF(g1, ow, device="cpu", **kw).run(stop=5).results
    np.testing.assert_array_equal(gpu.count_uint64, cpu.count_uint64)
    np.testing.assert_array_equal(gpu.frame_group_sizes, cpu.frame_group_sizes)
