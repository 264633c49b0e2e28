// Bindings of the CPU direct k-space sum (fastrdf/kspace.hpp) in _fastrdf_cpu.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fastrdf/cpu.hpp"
#include "fastrdf/kspace.hpp"
#include "kspace_args.hpp"

namespace py = pybind11;

namespace fastrdf {

namespace {

// A_a(k) for the species of `offsets`, the k vectors 2 pi n B^-T; complex128 (n_species, M).
py::array_t<std::complex<double>> kspace_amplitudes(py::array positions, py::array offsets,
                                                    py::array box, py::array n, int n_threads,
                                                    const std::string& isa) {
    static PlanCache cache;  // used under the GIL
    KSpaceArgs a;
    parse_kspace(a, positions, offsets, box, n, cache);
    if (n_threads < 0) throw std::invalid_argument("n_threads: must be >= 1 (or 0 for all cores)");
    const std::string variant = isa.empty() ? cpu::default_variant() : isa;
    const auto ok = cpu::usable_variants();
    if (std::find(ok.begin(), ok.end(), variant) == ok.end())
        throw std::invalid_argument("isa: this CPU cannot run the '" + variant + "' variant");
    const cpu::KSpaceFn kernel = cpu::kspace_kernel_for(variant);
    std::vector<double> acc(2 * static_cast<std::size_t>(a.n_species) * a.plan->slots.size(), 0.0);
    cpu::KSpaceProblem p;
    p.n_atoms = a.n_atoms;
    p.offsets = a.offsets.data();
    p.n_species = a.n_species;
    p.plan = a.plan.get();
    p.acc = acc.data();
    p.n_threads = n_threads == 0 ? cpu::hardware_threads() : n_threads;
    {
        py::gil_scoped_release release;
        convert(a);
        p.s = a.s.data();
        kernel(p);
    }
    return kspace_result(a, acc);
}

}  // namespace

void bind_kspace(py::module_& m) {
    m.def("kspace_amplitudes", &kspace_amplitudes, py::arg("positions"), py::arg("offsets"),
          py::arg("box"), py::arg("n"), py::arg("n_threads") = 0, py::arg("isa") = "",
          "A_a(k) = sum_{j in species a} exp(i k . r_j), k = 2 pi n B^-T: complex128 (n_species, M)");
}

}  // namespace fastrdf
