// Argument checking shared by the Python bindings of every engine (CPU and CUDA): one place
// turns the arrays of Engine.accumulate into a validated FrameProblem.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/box_setup.hpp"
#include "fastrdf/geometry.hpp"
#include "fastrdf/kernel_api.hpp"

namespace fastrdf {
namespace py = pybind11;

template <typename T>
const T* checked(const py::array& a, const char* name, py::ssize_t ndim) {
    if (a.ndim() != ndim) throw std::invalid_argument(std::string(name) + ": wrong number of dimensions");
    if (!py::isinstance<py::array_t<T>>(a)) throw py::type_error(std::string(name) + ": wrong dtype");
    if (!(a.flags() & py::array::c_style)) throw std::invalid_argument(std::string(name) + ": must be C-contiguous");
    return static_cast<const T*>(a.data());
}

// The names of an option table (kernel_api.hpp) as a tuple of str, for the modules' exports.
template <std::size_t N>
py::tuple option_names(const OptionName (&table)[N]) {
    py::tuple t(N);
    for (std::size_t k = 0; k < N; ++k) t[k] = py::str(table[k].name);
    return t;
}

// The bin edges an engine last checked: the array (held, so that its buffer stays alive and
// cannot be reused by another array) and a copy of its values, which the kernels read. An
// engine checks the edges once per array: every frame that passes the same array, of the same
// length and ends, takes the copy without check_edges.
struct CheckedEdges {
    py::object array = py::none();
    std::vector<double> values;
};

// One frame's arguments, checked. `p` holds everything but the coordinates, which each engine
// lays out its own way (xyz: the (n, 3) float32 array as given).
struct FrameArgs {
    FrameProblem p;
    const float* xyz = nullptr;
    std::size_t n_atoms = 0;
    std::vector<double> images;  // triclinic extra images (owned here; p.images points in)
    CheckedEdges edges;          // p.edges points into edges.values
};

// The kernels bin with numpy.histogram's rule for uniform bins: a fast index from
// (r - e_0) * nbins / (e_n - e_0), corrected by one bin against the edges for pairs within
// near_delta of an edge (geometry.hpp). That is exact only for numpy's own edges of a finite,
// increasing range, so anything else is refused: each edge must lie within a small fraction of
// near_delta of the uniform grid (numpy's linspace is a few ulp off it).
inline void check_edges(const double* e, int nbins) {
    const double lo = e[0], hi = e[nbins];
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(hi > lo))
        throw std::invalid_argument("edges: the range must be finite and increasing (rmin < rmax)");
    const double width = (hi - lo) / nbins;
    const double tol = 1e-2 * std::min(0.25, 1e-10 * (nbins + 1.0)) * width;
    for (int k = 0; k <= nbins; ++k) {
        const double uniform = lo + k * width;
        if (!(std::fabs(e[k] - uniform) <= tol + 8 * std::numeric_limits<double>::epsilon() *
                                                     std::max(std::fabs(lo), std::fabs(hi))))
            throw std::invalid_argument(
                "edges: must be numpy.histogram's uniform edges of (rmin, rmax) and nbins "
                "(edge " + std::to_string(k) + " is off the uniform grid, NaN or infinite)");
    }
}

// The checked edges of this frame (e: the nbins + 1 values of the array `edges`): the copy in
// `c` when `edges` is the array checked last, unchanged in length and ends, else a fresh copy
// once check_edges accepts it.
inline const double* checked_edges(CheckedEdges& c, const py::array& edges, const double* e,
                                   int nbins) {
    const std::size_t n = static_cast<std::size_t>(nbins) + 1;
    if (edges.is(c.array) && c.values.size() == n && c.values.front() == e[0] &&
        c.values.back() == e[nbins])
        return c.values.data();
    c.array = py::none();
    check_edges(e, nbins);
    c.values.assign(e, e + n);
    c.array = edges;
    return c.values.data();
}

// The box of one frame, checked, into p (box_kind, ortho / triclinic set-up, max_abs_coord);
// images receives the triclinic extra images (p.images points into it). rmax: the largest
// distance that must be exact (the last edge).
inline void parse_box(FrameProblem& p, std::vector<double>& images, int box_kind,
                      const py::object& box, double rmax) {
    images.clear();
    p.box_kind = box_kind;
    if (box_kind == kOrtho || box_kind == kOrthoScaled || is_triclinic_kind(box_kind) ||
        box_kind == kOrthoSlab) {
        py::array b = box.cast<py::array>();
        const double* m = checked<double>(b, "box", 2);
        // the slab boxes: the box vectors, then a row (h, w, 0) (OrthoSlabBox)
        const bool slab = is_slab_kind(box_kind);
        const py::ssize_t rows = slab ? 4 : 3;
        if (b.shape(0) != rows || b.shape(1) != 3)
            throw std::invalid_argument(slab ? "box: the slab box's shape must be (4, 3)"
                                             : "box: shape must be (3, 3)");
        if (slab) {
            p.slab_h = m[9];
            p.slab_w = m[10];
            if (!(p.slab_h > 0.0) || !std::isfinite(p.slab_h))
                throw std::invalid_argument("box: the slab half-thickness h must be positive and finite");
            if (!(p.slab_w == 0.0 || p.slab_w == 1.0))
                throw std::invalid_argument("box: the slab's w must be 0 (in-plane) or 1 (3D)");
        }
        if (!is_triclinic_kind(box_kind)) {
            for (int c = 0; c < 3; ++c) {
                p.ortho[c] = m[4 * c];
                p.ortho_inv32[c] = static_cast<float>(1.0 / p.ortho[c]);
                if (!(p.ortho[c] > 0.0) || !std::isfinite(p.ortho[c]))
                    throw std::invalid_argument("box: orthorhombic box lengths must be positive and finite");
            }
            p.max_abs_coord = kMaxBoxMultiples * std::min({p.ortho[0], p.ortho[1], p.ortho[2]});
        } else {
            // the slab's in-plane r2: images up to sqrt(rmax^2 + h^2) in 3D can count (with
            // rmax and h below half the box's widths, none besides the centred cell's)
            const double reach = box_kind == kTriclinicSlab && p.slab_w == 0.0
                                     ? std::sqrt(rmax * rmax + p.slab_h * p.slab_h) : rmax;
            const TriclinicSetup s = setup_triclinic(m, reach);
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 3; ++c) {
                    p.basis[3 * r + c] = s.a[r][c];
                    p.reciprocal[3 * r + c] = s.f[r][c];
                }
            images = s.images;
            p.max_abs_coord = kMaxBoxMultiples * std::min({s.width[0], s.width[1], s.width[2]});
            p.images = images.data();
            p.n_images = static_cast<int>(images.size() / 3);
        }
    } else if (box_kind != kNoBox) {
        throw std::invalid_argument("box_kind: must be 0 (none), 1 (orthorhombic), 2 (triclinic), 3 (orthorhombic, MDAnalysis brute-force arithmetic), 4 (orthorhombic slab) or 5 (triclinic slab)");
    }
}


// coords: (N, 3) float32; offsets: (S + 1,) int64; pairs: (P, 2) int32; edges: (nbins + 1,)
// float64; box: None or (3, 3) float64 box vectors as rows; labels: None or (N,) int32;
// out: (P, nbins) uint64.
inline void parse_frame(FrameArgs& a, const py::array& coords, const py::array& offsets,
                        const py::array& pairs, const py::array& edges, int box_kind,
                        const py::object& box, const py::object& labels, const py::array& out) {
    FrameProblem& p = a.p;
    p = FrameProblem{};
    a.images.clear();
    a.xyz = checked<float>(coords, "coords", 2);
    if (coords.shape(1) != 3) throw std::invalid_argument("coords: shape must be (n_atoms, 3)");
    a.n_atoms = static_cast<std::size_t>(coords.shape(0));
    const auto n = a.n_atoms;
    p.offsets = checked<int64_t>(offsets, "offsets", 1);
    p.n_species = static_cast<int>(offsets.shape(0)) - 1;
    p.pairs = checked<int32_t>(pairs, "pairs", 2);
    p.n_pairs = static_cast<int>(pairs.shape(0));
    p.edges = checked<double>(edges, "edges", 1);
    if (edges.shape(0) - 1 > kMaxBins)
        throw std::invalid_argument("edges: " + std::to_string(edges.shape(0) - 1) +
                                    " bins; the kernels take at most " + std::to_string(kMaxBins));
    p.nbins = static_cast<int>(edges.shape(0)) - 1;
    if (p.n_species < 1 || p.offsets[0] != 0 || p.offsets[p.n_species] != static_cast<int64_t>(n))
        throw std::invalid_argument("offsets: must start at 0 and end at n_atoms");
    for (int s = 0; s < p.n_species; ++s)
        if (p.offsets[s + 1] < p.offsets[s]) throw std::invalid_argument("offsets: must not decrease");
    if (pairs.shape(1) != 2) throw std::invalid_argument("pairs: shape must be (n_pairs, 2)");
    for (int i = 0; i < 2 * p.n_pairs; ++i)
        if (p.pairs[i] < 0 || p.pairs[i] >= p.n_species)
            throw std::invalid_argument("pairs: species index out of range");
    if (p.nbins < 1) throw std::invalid_argument("edges: need at least two edges");
    p.edges = checked_edges(a.edges, edges, p.edges, p.nbins);
    if (!(out.ndim() == 2 && out.shape(0) == p.n_pairs && out.shape(1) == p.nbins))
        throw std::invalid_argument("out: shape must be (n_pairs, nbins)");
    if (!py::isinstance<py::array_t<uint64_t>>(out) || !(out.flags() & py::array::c_style) ||
        !out.writeable())
        throw std::invalid_argument("out: must be a writeable C-contiguous uint64 array");

    if (!labels.is_none()) {
        py::array lab = labels.cast<py::array>();
        p.labels = checked<int32_t>(lab, "labels", 1);
        if (static_cast<std::size_t>(lab.shape(0)) != n)
            throw std::invalid_argument("labels: need one label per atom");
    }

    parse_box(p, a.images, box_kind, box, p.edges[p.nbins]);
}

}  // namespace fastrdf
