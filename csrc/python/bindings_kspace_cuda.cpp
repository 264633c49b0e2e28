// Bindings of the CUDA direct k-space sum (fastrdf/kspace_cuda.hpp) in _fastrdf_cuda.
#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "fastrdf/kspace_cuda.hpp"
#include "kspace_args.hpp"

namespace py = pybind11;
using namespace pybind11::literals;  // "name"_a = value

namespace fastrdf {

namespace {

// One GPU's k-space engine; CUDA is first touched by the constructor.
class KSpaceCuda {
   public:
    explicit KSpaceCuda(int device) : sums_(device) {}

    py::array_t<std::complex<double>> amplitudes(py::array positions, py::array offsets,
                                                 py::array box, py::array n) {
        KSpaceArgs a;
        parse_kspace(a, positions, offsets, box, n, cache_);
        std::vector<double> acc(2 * static_cast<std::size_t>(a.n_species) * a.plan->slots.size());
        {
            py::gil_scoped_release release;
            convert(a);
            sums_.run(a.s.data(), a.n_atoms, a.offsets.data(), a.n_species, a.plan, acc.data());
        }
        return kspace_result(a, acc);
    }

    py::dict last_launch() const {
        const gpu::KSpaceLaunch& l = sums_.last_launch();
        return py::dict("tasks"_a = l.tasks, "blocks"_a = l.blocks, "chunk_atoms"_a = l.chunk_atoms,
                        "super_chunk"_a = l.super_chunk, "super_chunks"_a = l.super_chunks,
                        "table_bytes"_a = l.table_bytes);
    }

    int device() const { return sums_.device(); }

   private:
    gpu::KSpaceSums sums_;
    PlanCache cache_;
};

}  // namespace

void bind_kspace_cuda(py::module_& m) {
    py::class_<KSpaceCuda>(m, "KSpaceCuda")
        .def(py::init<int>(), py::arg("device") = 0)
        .def("amplitudes", &KSpaceCuda::amplitudes, py::arg("positions"), py::arg("offsets"),
             py::arg("box"), py::arg("n"),
             "A_a(k) = sum_{j in species a} exp(i k . r_j), k = 2 pi n B^-T: complex128 (n_species, M)")
        .def_property_readonly("last_launch", &KSpaceCuda::last_launch)
        .def_property_readonly("device", &KSpaceCuda::device);
}

}  // namespace fastrdf
