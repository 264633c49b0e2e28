// Python bindings of the CUDA engine: mdakit_fastrdf._fastrdf_cuda
//
// Importing this module does not touch the GPU; CUDA is initialised by the first call that
// needs it (device_count, devices, CudaHistogrammer), in the process that makes it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "fastrdf/cuda.hpp"
#include "frame_args.hpp"

namespace py = pybind11;
using namespace fastrdf;
using namespace pybind11::literals;  // "name"_a = value: the launch and device dicts

#ifndef FASTRDF_CUDA_ARCHS
#define FASTRDF_CUDA_ARCHS "unknown"
#endif

namespace {

gpu::KernelChoice parse_kernel(const std::string& k) {
    return static_cast<gpu::KernelChoice>(option_value(kCudaKernelNames, k, "kernel"));
}

int parse_method(const std::string& m) { return option_value(kMethodNames, m, "method"); }

int parse_order(const std::string& o) { return option_value(kCellOrderNames, o, "cell_order"); }

int check_k(int k) {
    if (k < 1 || k > kMaxCellK)
        throw std::invalid_argument("cell_k: must be between 1 and " + std::to_string(kMaxCellK));
    return k;
}

// The per-worker CUDA engine. Counts stay on the device until synchronize(), which adds them
// into the `out` array of the last accumulate (kept alive here until then).
class CudaHistogrammer {
   public:
    CudaHistogrammer(int device, const std::string& kernel, int max_window_bins, bool exact_sqrt,
                     const std::string& method, int cell_k, const std::string& cell_order)
        : h_(device, parse_kernel(kernel), max_window_bins, exact_sqrt, parse_method(method),
             check_k(cell_k), parse_order(cell_order)) {}

    void accumulate(py::array coords, py::array offsets, py::array pairs, py::array edges,
                    int box_kind, py::object box, py::object labels, py::array out,
                    bool double_precision) {
        parse_frame(args_, coords, offsets, pairs, edges, box_kind, box, labels, out);
        if (h_.pending() && !out.is(out_)) synchronize();
        args_.p.double_precision = double_precision;
        uint64_t* host_out = static_cast<uint64_t*>(out.mutable_data());
        {
            py::gil_scoped_release release;
            h_.accumulate(args_.p, args_.xyz, args_.n_atoms, host_out);
        }
        out_ = out;
    }

    void synchronize() {
        if (!h_.pending()) return;
        py::array out = out_.cast<py::array>();
        uint64_t* dst = static_cast<uint64_t*>(out.mutable_data());
        {
            py::gil_scoped_release release;
            h_.synchronize(dst);
        }
        out_ = py::none();
    }

    py::dict last_launch() const {
        const gpu::LaunchInfo& l = h_.last_launch();
        return py::dict("kernel"_a = l.kernel, "sweeps"_a = l.sweeps, "window"_a = l.window,
                        "copies"_a = l.copies, "tasks"_a = l.tasks, "threads"_a = l.threads,
                        "rule"_a = l.rule, "method"_a = l.method,
                        "cells"_a = py::make_tuple(l.cells[0], l.cells[1], l.cells[2]),
                        "cell_k"_a = l.cell_k, "dense"_a = l.dense, "sorted"_a = l.sorted,
                        "image_chunks"_a = py::make_tuple(l.image_chunks[0], l.image_chunks[1],
                                                          l.image_chunks[2]),
                        "filter_delta"_a = l.filter_delta, "settled"_a = l.settled);
    }

    bool pending() const { return h_.pending(); }
    // Test hook (as CpuHistogrammer's): the float filter's bound times this (1; 0: every pair of
    // a double-precision frame in double).
    double double_filter() const { return h_.double_filter(); }
    void set_double_filter(double v) { h_.set_double_filter(v); }
    std::string last_method() const { return h_.last_launch().method; }
    int device() const { return h_.device(); }

   private:
    gpu::Histogrammer h_;
    FrameArgs args_;
    py::object out_ = py::none();
};

py::list devices() {
    py::list out;
    const int n = gpu::device_count(nullptr);
    for (int k = 0; k < n; ++k) {
        const gpu::DeviceInfo d = gpu::device_info(k);
        out.append(py::dict("index"_a = d.index, "name"_a = d.name,
                            "compute_capability"_a = py::make_tuple(d.cc_major, d.cc_minor),
                            "total_memory"_a = d.total_memory, "multiprocessors"_a = d.multiprocessors,
                            "shared_per_block_optin"_a = d.shared_per_block_optin,
                            "shared_per_multiprocessor"_a = d.shared_per_multiprocessor,
                            "l2_bytes"_a = d.l2_bytes));
    }
    return out;
}

}  // namespace

namespace fastrdf {
void bind_kspace_cuda(py::module_& m);  // bindings_kspace_cuda.cpp: the direct k-space sum
}

PYBIND11_MODULE(_fastrdf_cuda, m) {
    m.doc() = "CUDA pair-distance histogram kernels of mdakit_fastrdf";
    py::register_exception<gpu::CudaError>(m, "CudaError", PyExc_RuntimeError);
    py::register_exception<gpu::OutOfMemory>(m, "CudaOutOfMemoryError", PyExc_MemoryError);
    py::class_<CudaHistogrammer>(m, "CudaHistogrammer")
        .def(py::init<int, const std::string&, int, bool, const std::string&, int, const std::string&>(),
             py::arg("device") = 0, py::arg("kernel") = "auto", py::arg("max_window_bins") = 0,
             py::arg("exact_sqrt") = true, py::arg("method") = "auto", py::arg("cell_k") = 1,
             py::arg("cell_order") = "rowmajor")
        .def("accumulate", &CudaHistogrammer::accumulate, py::arg("coords"), py::arg("offsets"),
             py::arg("pairs"), py::arg("edges"), py::arg("box_kind"), py::arg("box"),
             py::arg("labels"), py::arg("out"), py::arg("double_precision"))
        .def("synchronize", &CudaHistogrammer::synchronize)
        .def_property_readonly("last_launch", &CudaHistogrammer::last_launch)
        .def_property_readonly("pending", &CudaHistogrammer::pending)
        .def_property("_double_filter", &CudaHistogrammer::double_filter,
                      &CudaHistogrammer::set_double_filter)
        .def_property_readonly("last_method", &CudaHistogrammer::last_method)
        .def_property_readonly("device", &CudaHistogrammer::device);
    m.def("device_count", []() { return gpu::device_count(nullptr); });
    m.def("device_error", []() {
        std::string why;
        gpu::device_count(&why);
        return why;
    });
    m.def("devices", &devices);
    m.def("runtime_version", &gpu::runtime_version);
    // the largest relative error of the device's approximate root over every positive normal
    // float (the float filter of double precision builds its bound on it; tests)
    m.def("sqrt_approx_error", &gpu::sqrt_approx_error, py::arg("device") = 0);
    m.def("driver_version", &gpu::driver_version);
    m.attr("architectures") = FASTRDF_CUDA_ARCHS;
    m.attr("fast_rule") = static_cast<bool>(FASTRDF_CUDA_FAST_RULE);
    // The names of the all-pairs kernels (kernel=...), for the Python engine
    m.attr("KERNELS") = option_names(kCudaKernelNames);
    bind_kspace_cuda(m);
}
