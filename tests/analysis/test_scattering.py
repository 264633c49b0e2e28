"""Elements, form factors, neutron scattering lengths, weights and the sinc transform
(mdakit_fastrdf.analysis.scattering) against values typed from published tables and
closed forms, never computed by periodictable or the package."""


import numpy as np
import pytest

from mdakit_fastrdf.analysis import scattering as sc

# International Tables for Crystallography Vol. C (2006), Table 6.1.1.1 (E. N. Maslen,
# A. G. Fox, M. A. O'Keefe), f0 of neutral atoms in electrons at s = sin(theta)/lambda
# (Å⁻¹). q = 4 pi s. Waasmaier & Kirfel (1995) fit these tables with five Gaussians; their
# paper quotes mean deviations of the order of 1e-3 electrons and at most a few 1e-3 for
# light atoms; the tolerance below (0.015 e) also covers the rounding of the table.
ITC_6111 = {
    "H": {0.0: 1.000, 0.1: 0.811, 0.2: 0.481, 0.3: 0.251, 0.4: 0.130, 0.5: 0.071},
    "O": {0.0: 8.000, 0.1: 7.250, 0.2: 5.634, 0.3: 4.094, 0.4: 3.010, 0.5: 2.338,
          0.6: 1.944},
}
# f0(0) = Z for every neutral atom (the number of electrons).
ATOMIC_NUMBER = {"C": 6, "N": 7, "O": 8, "S": 16, "P": 15, "Fe": 26, "Na": 11, "Cl": 17,
                 "Au": 79, "U": 92}

# Bound coherent scattering lengths b_c (fm), V. F. Sears, Neutron News 3(3), 26 (1992),
# as tabulated by NIST (https://www.ncnr.nist.gov/resources/n-lengths/). periodictable
# carries the Atominstitut table (Rauch & Waschkowski 2003), whose values for these
# elements differ from Sears's by at most 0.003 fm (D: 6.6681 vs 6.671).
SEARS_1992 = {"H": -3.7390, "D": 6.671, "O": 5.803, "C": 6.6460, "N": 9.36, "Fe": 9.45}


@pytest.mark.parametrize("element", sorted(ITC_6111))
def test_xray_form_factor_against_international_tables(element):
    s = np.array(sorted(ITC_6111[element]))
    expected = np.array([ITC_6111[element][v] for v in s])
    got = sc.xray_form_factor(element, 4 * np.pi * s)
    np.testing.assert_allclose(got, expected, atol=0.015)


def test_hydrogen_form_factor_against_closed_form():
    # The hydrogen atom's 1s density gives f(q) = 1 / (1 + (q a0 / 2)^2)^2 exactly (a0 the
    # Bohr radius, 0.529177 Å); the fit follows it to a few 1e-3 electrons.
    a0 = 0.52917721
    q = np.linspace(0.0, 8.0, 33)
    exact = 1.0 / (1.0 + (q * a0 / 2) ** 2) ** 2
    np.testing.assert_allclose(sc.xray_form_factor("H", q), exact, atol=5e-3)
    # deuterium and tritium have hydrogen's electrons
    np.testing.assert_array_equal(sc.xray_form_factor("D", q), sc.xray_form_factor("H", q))


@pytest.mark.parametrize("element", sorted(ATOMIC_NUMBER))
def test_xray_forward_scattering_is_atomic_number(element):
    # the fits reproduce f0(0) = Z to a few 1e-3 for light atoms, 0.02-0.04 for heavy ones
    z = ATOMIC_NUMBER[element]
    assert sc.xray_form_factor(element, 0.0) == pytest.approx(z, abs=0.01 if z < 30 else 0.05)


def test_xray_form_factor_decreases():
    q = np.linspace(0, 20, 200)
    for element in ("H", "C", "O", "Fe"):
        assert np.all(np.diff(sc.xray_form_factor(element, q)) < 0)


@pytest.mark.parametrize("element", sorted(SEARS_1992))
def test_neutron_scattering_length_against_sears(element):
    assert sc.neutron_scattering_length(element) == pytest.approx(SEARS_1992[element],
                                                                  abs=0.005)


def test_species_weights_kinds():
    q = np.array([0.0, 0.5, 2.0])
    x = sc.species_weights(["O", "H"], q, "xray")
    assert x.shape == (2, 3) and x.dtype == np.float64
    np.testing.assert_allclose(x[:, 0], [8, 1], atol=0.01)
    n = sc.species_weights(["OW", "HW"], q, "neutron", elements=["O", "H"])
    np.testing.assert_allclose(n, [[5.803] * 3, [-3.739] * 3], atol=0.005)
    np.testing.assert_array_equal(sc.species_weights(["a", "b"], q, "number"), np.ones((2, 3)))
    user = sc.species_weights(["a", "B"], q, {"a": 2.5, "b": lambda q: 1 + q})
    np.testing.assert_array_equal(user, [[2.5, 2.5, 2.5], [1.0, 1.5, 3.0]])
    # case-insensitive labels only when unambiguous
    with pytest.raises(ValueError, match="no weight for the species"):
        sc.species_weights(["aB"], q, {"AB": 1.0, "ab": 2.0})
    # mixed-case element symbols of topologies
    np.testing.assert_array_equal(sc.species_weights(["FE"], q, "neutron"),
                                  sc.species_weights(["Fe"], q, "neutron"))


@pytest.mark.parametrize("call, match", [
    (lambda: sc.species_weights(["O", "H"], [1.0], {"O": 1.0}), r"no weight for the species \['H'\]"),
    (lambda: sc.species_weights(["Xq"], [1.0]), "'Xq' is not an element symbol"),
    (lambda: sc.species_weights([""], [1.0], "neutron"), "empty element symbol"),
    (lambda: sc.species_weights(["Es"], [1.0], "xray"), "no X-ray form factor for 'Es'"),
    (lambda: sc.species_weights(["Cf"], [1.0], "neutron"), "no coherent scattering length"),
    (lambda: sc.species_weights(["O"], [1.0], "electron"), "weights must be 'xray'"),
    (lambda: sc.species_weights(["O"], [-1.0]), "must not be negative"),
    (lambda: sc.species_weights(["O"], [np.nan]), "must be finite"),
    (lambda: sc.species_weights(["O"], [80.0]), "q <= 24π"),
    (lambda: sc.species_weights(["O"], [1.0], {"O": np.inf}), "not finite"),
    (lambda: sc.species_weights(["O"], [1.0, 2.0], {"O": [1, 2, 3]}), "one value per q"),
    (lambda: sc.species_weights(["O", "H"], [1.0], "xray", elements=["O"]), "one element per species"),
])
def test_weight_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_elements_missing_or_unknown_name_the_atoms(fresh_adk_vacuum):
    u = fresh_adk_vacuum  # its own: elements are added to it
    with pytest.raises(ValueError, match=r"no elements.*guess_TopologyAttrs"):
        sc.atom_elements(u.atoms)
    u.add_TopologyAttr("elements", ["C"] * (len(u.atoms) - 2) + ["", "Qq"])
    with pytest.raises(ValueError, match=r"2 atom\(s\) have no known element: index 3339 "
                                         r"name 'OT1' element '', index 3340"):
        sc.atom_elements(u.atoms)


def test_species_elements_from_the_topology(fresh_adk_vacuum):
    u = fresh_adk_vacuum  # its own: elements are guessed onto it
    u.guess_TopologyAttrs(to_guess=["elements"])
    groups = sc.species_groups(u.atoms, by="element")
    labels = [label for label, _ in groups]
    assert sorted(labels) == ["C", "H", "N", "O", "S"]
    assert sc.species_elements([g for _, g in groups], labels) == labels
    by_name = sc.species_groups(u.select_atoms("name CA CB"), by="name")
    assert sc.species_elements([g for _, g in by_name]) == ["C", "C"]
    with pytest.raises(ValueError, match="mixes the elements"):
        sc.species_elements([u.select_atoms("resid 1")], ["res1"])


def test_sinc_matrix_and_transform():
    q = np.array([0.0, 0.5, 2.0])
    r = np.array([0.0, 0.25, 1.0, 7.5])
    m = sc.sinc_matrix(q, r)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = np.sin(np.outer(q, r)) / np.outer(q, r)
    ref[np.outer(q, r) == 0] = 1.0
    np.testing.assert_allclose(m, ref, rtol=1e-14, atol=1e-15)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 1000, size=(4, len(r))).astype(float)
    np.testing.assert_allclose(sc.sinc_transform(values, r, q), values @ ref.T, rtol=1e-13)
    # chunks of the q grid give the same sums
    qq = np.linspace(0.01, 3, 101)
    rr = np.linspace(0.05, 40, 800)
    hist = rng.random((3, len(rr)))
    np.testing.assert_allclose(sc.sinc_transform(hist, rr, qq, chunk_bytes=8 * 800 * 7),
                               sc.sinc_transform(hist, rr, qq), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="one value per distance"):
        sc.sinc_transform(values[:, :3], r, q)
