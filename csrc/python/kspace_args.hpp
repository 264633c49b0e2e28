// Argument checking of the direct k-space sum, shared by the CPU and CUDA bindings: positions,
// species offsets, box and integer k indices into fractional coordinates and a plan
// (fastrdf/kspace.hpp). The Python engine (mdakit_fastrdf/engine/kspace.py) checks the same
// things first with messages for users; these keep direct callers safe.
#pragma once

#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <complex>
#include <memory>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/kspace.hpp"

namespace fastrdf {
namespace py = pybind11;

struct KSpaceArgs {
    std::vector<double> s;  // n_atoms x 3 fractional coordinates in [-1/2, 1/2] (convert())
    const void* xyz = nullptr;  // the caller's positions (float64 if f64, else float32)
    bool f64 = true;
    double inv[9] = {};  // the box's inverse
    std::size_t n_atoms = 0;
    std::vector<std::int64_t> offsets;
    int n_species = 0;
    std::shared_ptr<const kspace::Plan> plan;
};

// The plan of the last n (kept with a copy of n): an analysis passes the same vectors every
// frame, and comparing them costs far less than sorting them again. Used under the GIL; the
// kernels hold their own reference while it runs without it.
struct PlanCache {
    std::vector<std::int32_t> n;
    std::shared_ptr<const kspace::Plan> plan;
    std::shared_ptr<const kspace::Plan> get(const std::int32_t* values, std::int64_t count) {
        const auto size = static_cast<std::size_t>(3 * count);
        if (plan && n.size() == size && std::equal(n.begin(), n.end(), values)) return plan;
        auto fresh = std::make_shared<const kspace::Plan>(kspace::make_plan(values, count));
        n.assign(values, values + size);
        plan = fresh;
        return plan;
    }
};

inline void parse_kspace(KSpaceArgs& a, const py::array& positions, const py::array& offsets,
                         const py::array& box, const py::array& n, PlanCache& cache) {
    const bool f64 = py::isinstance<py::array_t<double>>(positions);
    if (positions.ndim() != 2 || positions.shape(1) != 3 ||
        !(f64 || py::isinstance<py::array_t<float>>(positions)) ||
        !(positions.flags() & py::array::c_style))
        throw std::invalid_argument("positions: must be a C-contiguous (n_atoms, 3) float32 or float64 array");
    if (box.ndim() != 2 || box.shape(0) != 3 || box.shape(1) != 3 ||
        !py::isinstance<py::array_t<double>>(box) || !(box.flags() & py::array::c_style))
        throw std::invalid_argument("box_vectors: must be a C-contiguous (3, 3) float64 array (rows a, b, c)");
    if (offsets.ndim() != 1 || offsets.shape(0) < 2 || !py::isinstance<py::array_t<std::int64_t>>(offsets) ||
        !(offsets.flags() & py::array::c_style))
        throw std::invalid_argument("offsets: must be a C-contiguous int64 array of n_species + 1 >= 2 entries");
    if (n.ndim() != 2 || n.shape(1) != 3 || !py::isinstance<py::array_t<std::int32_t>>(n) ||
        !(n.flags() & py::array::c_style))
        throw std::invalid_argument("n: must be a C-contiguous (M, 3) int32 array");
    if (n.shape(0) < 1) throw std::invalid_argument("n: no k vectors (M = 0)");
    a.n_atoms = static_cast<std::size_t>(positions.shape(0));
    const auto* off = static_cast<const std::int64_t*>(offsets.data());
    a.n_species = static_cast<int>(offsets.shape(0) - 1);
    a.offsets.assign(off, off + offsets.shape(0));
    if (a.offsets.front() != 0 || a.offsets.back() != static_cast<std::int64_t>(a.n_atoms))
        throw std::invalid_argument("offsets: must run from 0 to n_atoms (every atom in one species)");
    for (int k = 0; k < a.n_species; ++k)
        if (a.offsets[k + 1] < a.offsets[k]) throw std::invalid_argument("offsets: must not decrease");
    kspace::invert_box(static_cast<const double*>(box.data()), a.inv);
    a.xyz = positions.data();
    a.f64 = f64;
    a.plan = cache.get(static_cast<const std::int32_t*>(n.data()), n.shape(0));
}

// The fractional coordinates of the parsed positions (no Python API: the callers release
// the GIL around it and the kernel, the positions' array staying alive in the call).
inline void convert(KSpaceArgs& a) {
    a.s.resize(3 * a.n_atoms);
    const bool finite =
        a.f64 ? kspace::fractional(static_cast<const double*>(a.xyz), a.n_atoms, a.inv, a.s.data())
              : kspace::fractional(static_cast<const float*>(a.xyz), a.n_atoms, a.inv, a.s.data());
    if (!finite) throw std::invalid_argument("positions: must be finite (a NaN or an infinity was found)");
}

// The (n_species, M) complex128 result from the slot sums.
inline py::array_t<std::complex<double>> kspace_result(const KSpaceArgs& a, const std::vector<double>& acc) {
    py::array_t<std::complex<double>> out({static_cast<py::ssize_t>(a.n_species),
                                           static_cast<py::ssize_t>(a.plan->n_vectors)});
    kspace::scatter(*a.plan, a.n_species, acc.data(), reinterpret_cast<double*>(out.mutable_data()));
    return out;
}

}  // namespace fastrdf
