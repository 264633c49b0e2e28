// Python bindings of the CPU engine: mdakit_fastrdf._fastrdf_cpu
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <new>
#include <unistd.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>


#include "fastrdf/box_setup.hpp"
#include "fastrdf/cpu.hpp"
#include "fastrdf/geometry.hpp"
#include "fastrdf/sites.hpp"
#include "frame_args.hpp"

namespace py = pybind11;
using namespace fastrdf;

#ifndef FASTRDF_VERSION
#define FASTRDF_VERSION "unknown"
#endif
#ifndef FASTRDF_COMPILER
#define FASTRDF_COMPILER "unknown"
#endif

namespace {

int max_threads() {
    return cpu::hardware_threads();
}

// The per-worker CPU engine: owns reusable buffers, one call histograms one frame.
class CpuHistogrammer {
   public:
    CpuHistogrammer(int n_threads, const std::string& isa, const std::string& method, int cell_k,
                    const std::string& cell_order) {
        // The Python Engine validates its options (from the names exported below); these
        // checks keep direct callers from building an out-of-range grid or plan.
        order_ = option_value(kCellOrderNames, cell_order, "cell_order");
        method_ = option_value(kMethodNames, method, "method");
        if (cell_k < 0 || cell_k > kMaxCellK)
            throw std::invalid_argument("cell_k: must be between 1 and " + std::to_string(kMaxCellK) +
                                        " (or 0: the cheapest of 1, 2, 3)");
        cell_k_ = cell_k;
        if (n_threads < 0) throw std::invalid_argument("n_threads: must be >= 1 (or 0 for all cores)");
        n_threads_ = n_threads == 0 ? max_threads() : n_threads;
        isa_ = isa.empty() ? cpu::default_variant() : isa;
        kernel_ = cpu::kernel_for(isa_);
        const auto ok = cpu::usable_variants();
        if (std::find(ok.begin(), ok.end(), isa_) == ok.end())
            throw std::invalid_argument("isa: this CPU cannot run the '" + isa_ + "' variant");
        l2_ = cpu::l2_cache_bytes();
    }

    // coords: (N, 3) float32; offsets: (S + 1,) int64; pairs: (P, 2) int32; edges: (nbins + 1,)
    // float64; box: None or (3, 3) float64 box vectors as rows; labels: None or (N,) int32;
    // out: (P, nbins) uint64, accumulated into.
    void accumulate(py::array coords, py::array offsets, py::array pairs, py::array edges,
                    int box_kind, py::object box, py::object labels, py::array out,
                    bool double_precision) {
        parse_frame(args_, coords, offsets, pairs, edges, box_kind, box, labels, out);
        FrameProblem& p = args_.p;
        p.out = static_cast<uint64_t*>(out.mutable_data());
        const std::size_t n = args_.n_atoms;
        const float* xyz = args_.xyz;

        // Structure-of-arrays copy, checking every coordinate is finite.
        // kRowPad readable elements past the end (kernel_api.hpp)
        for (auto* v : {&x_, &y_, &z_}) {
            v->resize(n + kRowPad);
            std::fill(v->begin() + n, v->end(), 0.f);
        }
        if (p.labels) {
            labels_.assign(p.labels, p.labels + n);
            labels_.resize(n + kRowPad, 0);
            p.labels = labels_.data();
        }
        bool finite = true;
        float max_abs = 0.f;
        for (std::size_t i = 0; i < n; ++i) {
            x_[i] = xyz[3 * i];
            y_[i] = xyz[3 * i + 1];
            z_[i] = xyz[3 * i + 2];
            finite &= std::isfinite(x_[i]) & std::isfinite(y_[i]) & std::isfinite(z_[i]);
            max_abs = std::max({max_abs, std::fabs(x_[i]), std::fabs(y_[i]), std::fabs(z_[i])});
        }
        check_coordinates(p, finite, max_abs);
        p.x = x_.data();
        p.y = y_.data();
        p.z = z_.data();
        p.double_precision = double_precision;
        p.n_threads = n_threads_;
        p.l2_bytes = l2_;
        p.method = method_;
        p.cell_k = cell_k_;
        p.cell_order = order_;
        // The per-thread uint32 histograms are the kernel's largest buffers: check them before
        // allocating (Linux overcommits, so a failed allocation would surface as the OOM killer
        // while the threads clear them, not as bad_alloc).
        const double ws_bytes = workspace_bytes(p);
        const double phys = physical_memory_bytes();
        if (phys > 0 && ws_bytes > phys) raise_workspace_memory_error(p, ws_bytes, phys);
        bool no_memory = false;
        {
            py::gil_scoped_release release;
            try {
                kernel_(p, ws_);
            } catch (const std::bad_alloc&) {
                no_memory = true;
            }
        }
        if (no_memory) raise_workspace_memory_error(p, ws_bytes, phys);
    }

    // Bytes of the per-thread histograms of a frame: n_threads x n_pairs x (nbins + 16) uint32.
    static double workspace_bytes(const FrameProblem& p) {
        return 4.0 * p.n_threads * static_cast<double>(p.n_pairs) * (p.nbins + 16.0);
    }

    [[noreturn]] static void raise_workspace_memory_error(const FrameProblem& p, double bytes,
                                                          double phys) {
        std::string msg = "nbins: the CPU kernel needs " + gib(bytes) +
                          " GiB for its per-thread histograms (" + std::to_string(p.n_threads) +
                          " threads x " + std::to_string(p.n_pairs) + " species pairs x (" +
                          std::to_string(p.nbins) + " + 16) bins x 4 bytes)";
        if (phys > 0) msg += " but the machine has " + gib(phys) + " GiB";
        msg += "; use fewer bins, species pairs or threads (n_threads)";
        PyErr_SetString(PyExc_MemoryError, msg.c_str());
        throw py::error_already_set();
    }

    static std::string gib(double bytes) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f", bytes / 1073741824.0);
        return buf;
    }

    static double physical_memory_bytes() {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        return pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
    }

    // Test hooks: pairs a thread bins before it flushes its uint32 histograms (default
    // 2^32 - 1), and whether the last frame ever announced more than that at once.
    uint64_t flush_limit() const { return ws_.flush_limit; }
    void set_flush_limit(uint64_t v) {
        if (v < 1 || v > 0xFFFFFFFFull) throw std::invalid_argument("_flush_limit: must be in [1, 2^32 - 1]");
        ws_.flush_limit = v;
    }
    bool overfull() const { return ws_.overfull.load(); }
    // Double precision: the float filter's bound times this (1; 0: every pair in double).
    double double_filter() const { return ws_.double_filter; }
    void set_double_filter(double v) {
        if (!(v >= 0.0 && v <= 1.0)) throw std::invalid_argument("_double_filter: must be in [0, 1]");
        ws_.double_filter = v;
    }
    py::tuple last_filter() const {
        return py::make_tuple(ws_.last_filter_delta, ws_.settled.load());
    }

    int n_threads() const { return n_threads_; }
    // How the last frame ran: 'allpairs' or 'cells', and the cell grid when it was planned.
    std::string last_method() const { return ws_.used_cells ? "cells" : "allpairs"; }
    py::tuple last_block_images() const {
        return py::make_tuple(ws_.block_images[0].load(), ws_.block_images[1].load(),
                              ws_.block_images[2].load());
    }
    py::dict last_plan() const {
        py::dict d;
        const CellPlan& pl = ws_.plan;
        d["cells"] = py::make_tuple(pl.n[0], pl.n[1], pl.n[2]);
        d["cell_k"] = pl.k;
        d["allpairs_pairs"] = pl.allpairs_pairs;
        d["cell_pairs"] = pl.cell_pairs;
        d["cell_rows"] = pl.cell_rows;
        d["cell_cost"] = pl.cell_cost;
        return d;
    }
    const std::string& isa() const { return isa_; }

   private:
    int n_threads_ = 1;
    int method_ = kMethodAuto;
    int cell_k_ = 0;
    int order_ = kOrderRowMajor;
    std::string isa_;
    cpu::KernelFn kernel_ = nullptr;
    std::size_t l2_ = 1 << 20;
    Workspace ws_;
    std::vector<float> x_, y_, z_;
    std::vector<int32_t> labels_;
    FrameArgs args_;
};

void wrap_positions(py::array coords, py::array box, bool triclinic) {
    if (!py::isinstance<py::array_t<float>>(coords) || coords.ndim() != 2 || coords.shape(1) != 3 ||
        !(coords.flags() & py::array::c_style) || !coords.writeable())
        throw std::invalid_argument("coords: must be a writeable C-contiguous (n, 3) float32 array");
    const float* m = checked<float>(box, "box", 2);
    float* xyz = static_cast<float*>(coords.mutable_data());
    const auto n = static_cast<std::size_t>(coords.shape(0));
    py::gil_scoped_release release;
    if (triclinic) {
        cpu::wrap_triclinic(xyz, n, m);
    } else {
        const float l[3] = {m[0], m[4], m[8]};
        cpu::wrap_ortho(xyz, n, l);
    }
}

// One frame's positions of the atoms `ix` (rows of `positions`) copied into `out`, in one
// pass that also checks that every value is finite (a NaN or an infinity anywhere makes the
// frame's RDF undefined). Returns false when one is not. The analyses' only host copy of a
// frame before the kernel's own layout.
bool gather_positions(py::array positions, py::array ix, py::array out) {
    const float* src = checked<float>(positions, "positions", 2);
    const std::int64_t* idx = checked<std::int64_t>(ix, "ix", 1);
    if (positions.shape(1) != 3) throw std::invalid_argument("positions: must be (n, 3)");
    if (!py::isinstance<py::array_t<float>>(out) || out.ndim() != 2 || out.shape(1) != 3 ||
        !(out.flags() & py::array::c_style) || !out.writeable() || out.shape(0) != ix.shape(0))
        throw std::invalid_argument("out: must be a writeable C-contiguous (len(ix), 3) float32 array");
    float* dst = static_cast<float*>(out.mutable_data());
    const auto n = static_cast<std::size_t>(ix.shape(0));
    const auto rows = static_cast<std::int64_t>(positions.shape(0));
    for (std::size_t k = 0; k < n; ++k)
        if (idx[k] < 0 || idx[k] >= rows) throw std::out_of_range("ix: an index is outside positions");
    py::gil_scoped_release release;
    bool finite = true;
    for (std::size_t k = 0; k < n; ++k) {
        const float* a = src + 3 * idx[k];
        float* b = dst + 3 * k;
        b[0] = a[0];
        b[1] = a[1];
        b[2] = a[2];
        // x - x is 0 for finite x and NaN for NaN or an infinity
        finite &= (a[0] - a[0]) + (a[1] - a[1]) + (a[2] - a[2]) == 0.0f;
    }
    return finite;
}

py::dict triclinic_setup(py::array box, double rmax) {
    const double* m = checked<double>(box, "box", 2);
    const TriclinicSetup s = setup_triclinic(m, rmax);
    py::array_t<double> basis({3, 3}), recip({3, 3});
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) {
            basis.mutable_at(r, c) = s.a[r][c];
            recip.mutable_at(r, c) = s.f[r][c];
        }
    py::array_t<double> images({static_cast<py::ssize_t>(s.images.size() / 3), py::ssize_t(3)});
    std::copy(s.images.begin(), s.images.end(), images.mutable_data());
    py::dict d;
    d["basis"] = basis;
    d["reciprocal"] = recip;
    d["widths"] = py::make_tuple(s.width[0], s.width[1], s.width[2]);
    d["images"] = images;
    return d;
}

// InterRDF_s: adds one frame's site-specific histograms of coords1 x coords2 into out
// ((n1, n2, nbins) float64), binned with InterRDF_s's rule (see sites.hpp).
void site_histograms(py::array coords1, py::array coords2, double rmin, double rmax, int nbins,
                     int box_kind, py::object box, py::array out, bool double_precision,
                     int n_threads) {
    cpu::SitesProblem p;
    p.xyz1 = checked<float>(coords1, "coords1", 2);
    p.xyz2 = checked<float>(coords2, "coords2", 2);
    if (coords1.shape(1) != 3 || coords2.shape(1) != 3)
        throw std::invalid_argument("coords: shape must be (n_atoms, 3)");
    p.n1 = static_cast<std::size_t>(coords1.shape(0));
    p.n2 = static_cast<std::size_t>(coords2.shape(0));
    if (nbins < 1) throw std::invalid_argument("nbins: must be >= 1");
    if (!(rmax > rmin) || !std::isfinite(rmin) || !std::isfinite(rmax))
        throw std::invalid_argument("range: need finite rmin < rmax");
    p.rmin = rmin;
    p.rmax = rmax;
    p.nbins = nbins;
    if (!(out.ndim() == 3 && static_cast<std::size_t>(out.shape(0)) == p.n1 &&
          static_cast<std::size_t>(out.shape(1)) == p.n2 && out.shape(2) == nbins))
        throw std::invalid_argument("out: shape must be (n1, n2, nbins)");
    if (!py::isinstance<py::array_t<double>>(out) || !(out.flags() & py::array::c_style) ||
        !out.writeable())
        throw std::invalid_argument("out: must be a writeable C-contiguous float64 array");
    p.out = static_cast<double*>(out.mutable_data());
    if (is_slab_kind(box_kind))
        throw std::invalid_argument("box_kind: site histograms (InterRDF_s) take no slab box");
    std::vector<double> images;
    parse_box(p.box, images, box_kind, box, rmax);
    p.double_precision = double_precision;
    if (n_threads < 0) throw std::invalid_argument("n_threads: must be >= 1 (or 0 for all cores)");
    p.n_threads = n_threads == 0 ? max_threads() : n_threads;
    py::gil_scoped_release release;
    cpu::site_histograms(p);
}

}  // namespace

namespace fastrdf {
void bind_kspace(py::module_& m);  // bindings_kspace.cpp: the direct k-space sum
void bind_displacements(py::module_& m);  // cpu/displacements.cpp: self parts of dynamics
}

PYBIND11_MODULE(_fastrdf_cpu, m) {
    m.doc() = "CPU pair-distance histogram kernels of mdakit_fastrdf";
    py::class_<CpuHistogrammer>(m, "CpuHistogrammer")
        .def(py::init<int, const std::string&, const std::string&, int, const std::string&>(),
             py::arg("n_threads") = 0, py::arg("isa") = "", py::arg("method") = "auto",
             py::arg("cell_k") = 0, py::arg("cell_order") = "rowmajor")
        .def("accumulate", &CpuHistogrammer::accumulate, py::arg("coords"), py::arg("offsets"),
             py::arg("pairs"), py::arg("edges"), py::arg("box_kind"), py::arg("box"),
             py::arg("labels"), py::arg("out"), py::arg("double_precision"))
        .def_property_readonly("n_threads", &CpuHistogrammer::n_threads)
        .def_property_readonly("isa", &CpuHistogrammer::isa)
        .def_property_readonly("last_method", &CpuHistogrammer::last_method)
        .def_property_readonly("last_block_images", &CpuHistogrammer::last_block_images,
                               "Cell lists in a periodic box, the last frame: blocks of 16 j "
                               "atoms that took each pair's own image, one shift for every row "
                               "of a cell, the shift 0 (same counts either way)")
        .def_property_readonly("last_plan", &CpuHistogrammer::last_plan)
        .def_property("_flush_limit", &CpuHistogrammer::flush_limit, &CpuHistogrammer::set_flush_limit)
        .def_property_readonly("_overfull", &CpuHistogrammer::overfull)
        .def_property("_double_filter", &CpuHistogrammer::double_filter,
                      &CpuHistogrammer::set_double_filter)
        .def_property_readonly("last_filter", &CpuHistogrammer::last_filter,
                               "Double precision, the last frame: the float filter's bound in "
                               "bin units (-1: every pair ran in double) and the pairs it sent "
                               "to double (same counts either way)");
    m.def("wrap_positions", &wrap_positions, py::arg("coords"), py::arg("box"), py::arg("triclinic"));
    m.def("gather_positions", &gather_positions, py::arg("positions"), py::arg("ix"), py::arg("out"));
    m.def("site_histograms", &site_histograms, py::arg("coords1"), py::arg("coords2"),
          py::arg("rmin"), py::arg("rmax"), py::arg("nbins"), py::arg("box_kind"), py::arg("box"),
          py::arg("out"), py::arg("double_precision"), py::arg("n_threads"));
    m.def("triclinic_setup", &triclinic_setup, py::arg("box"), py::arg("rmax"));
    m.def("compiled_variants", &cpu::compiled_variants);
    m.def("usable_variants", &cpu::usable_variants);
    m.def("default_variant", &cpu::default_variant);
    m.def("l2_cache_bytes", &cpu::l2_cache_bytes);
    m.def("max_threads", &max_threads);
    bind_kspace(m);
    bind_displacements(m);
    m.attr("threads") = "fork-aware std::thread pool";
    // The constants of the kernels, for the Python engine (mdakit_fastrdf.engine)
    m.attr("MAX_BINS") = kMaxBins;
    m.attr("NO_BOX") = static_cast<int>(kNoBox);
    m.attr("ORTHO") = static_cast<int>(kOrtho);
    m.attr("TRICLINIC") = static_cast<int>(kTriclinic);
    m.attr("ORTHO_SCALED") = static_cast<int>(kOrthoScaled);
    m.attr("ORTHO_SLAB") = static_cast<int>(kOrthoSlab);
    m.attr("TRICLINIC_SLAB") = static_cast<int>(kTriclinicSlab);
    m.attr("MAX_CELL_K") = kMaxCellK;
    m.attr("METHODS") = option_names(kMethodNames);
    m.attr("CELL_ORDERS") = option_names(kCellOrderNames);
    m.attr("CUDA_KERNELS") = option_names(kCudaKernelNames);
    m.attr("version") = FASTRDF_VERSION;
    m.attr("compiler") = FASTRDF_COMPILER;
}
