// The interface between the engine (bindings) and the compiled kernels of one frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "fastrdf/cells.hpp"
#include "fastrdf/geometry.hpp"

namespace fastrdf {

// How a kernel finds the pairs: every pair, cell lists (cells.hpp), or whichever is expected
// to be faster for the frame.
enum Method : int { kMethodAuto = 0, kMethodAllPairs = 1, kMethodCells = 2 };

// The CPU kernels compute rows in whole blocks of 16 lanes: every coordinate and label array
// handed to them holds kRowPad readable (finite) elements past its last atom.
constexpr int kRowPad = 16;

// The most bins any kernel takes (the GPU's float bin index needs nbins < 2^22; the CPU keeps
// the same limit so that every device accepts the same problems).
constexpr int kMaxBins = 4000000;

// One frame's work: every requested species pair of one coordinate block.
struct FrameProblem {
    // Coordinates of all species, structure of arrays, species s at [offsets[s], offsets[s+1]).
    const float* x = nullptr;
    const float* y = nullptr;
    const float* z = nullptr;
    const int32_t* labels = nullptr;  // per-atom exclusion labels (pairs with equal labels skip) or null
    const int64_t* offsets = nullptr;
    int n_species = 0;
    const int32_t* pairs = nullptr;   // 2 * n_pairs species indices (a, b)
    int n_pairs = 0;

    const double* edges = nullptr;    // nbins + 1, numpy.histogram's edges
    int nbins = 0;

    int box_kind = 0;                 // BoxKind
    double ortho[3] = {0, 0, 0};      // orthorhombic lengths
    float ortho_inv32[3] = {0, 0, 0}; // float(1 / L), for kOrthoScaled (set by the caller: a
                                      // float round trip in one expression can be folded away
                                      // by GCC 12's SLP vectoriser)
    double basis[9] = {0};            // triclinic reduced basis (rows)
    double reciprocal[9] = {0};       // triclinic reciprocal vectors (rows)
    const double* images = nullptr;   // triclinic extra images (3 * n_images)
    int n_images = 0;

    double max_abs_coord = 1e300;     // largest |coordinate| the box maths is exact for

    int method = kMethodAuto;
    int cell_k = 2;                   // cells per r_max (cell side r_max / cell_k)
    int cell_order = kOrderRowMajor;  // CellOrder of the columns

    bool double_precision = false;
    int n_threads = 1;
    std::size_t l2_bytes = 1 << 20;

    uint64_t* out = nullptr;          // n_pairs * nbins, accumulated into
};

// Reusable per-engine buffers, so no frame allocates once sizes are stable.
struct Workspace {
    std::vector<uint32_t> thread_hist;
    std::vector<uint32_t> thread_idx;  // one index buffer per thread
    std::vector<uint64_t> thread_since_flush;
    std::vector<int64_t> tasks;  // 5 ints per task: pair, i0, i1, j0, j1
    std::vector<float> edges_f;
    std::vector<double> projections;  // cell lists, triclinic boxes: f[k] . x per sorted atom
    std::vector<float> images_f;
    CellGrid grid;
    CellPlan plan;            // the last frame's plan (when the method was not all-pairs)
    bool used_cells = false;  // whether the last frame ran on cell lists
    // Pairs a thread bins into its private uint32 histogram before flushing it into the
    // uint64 totals. UINT32_MAX in production; tests lower it to exercise the flushes.
    uint64_t flush_limit = 0xFFFFFFFFull;
    std::atomic<bool> overfull{false};  // a reservation above flush_limit happened (a bug)
    // cell lists in a periodic box: blocks of 16 j atoms that took each pair's own image, one
    // shift, the shift 0 (histogram.cpp, certify_blocks), in the last frame
    std::atomic<uint64_t> block_images[3] = {};
};


// Every engine's coordinate copy ends with this: all finite, and within kMaxBoxMultiples box
// widths of the origin (wrapped trajectories are far inside; this guards nint's range).
inline void check_coordinates(const FrameProblem& p, bool finite, double max_abs) {
    if (!finite) throw std::invalid_argument("coordinates: a frame holds NaN or infinite positions");
    if (max_abs > p.max_abs_coord)
        throw std::invalid_argument(
            "coordinates: a position lies more than 2^20 box widths from the origin; wrap the "
            "coordinates into the box (e.g. with a transformation) first");
}

// ---- What every engine builds the same way from a FrameProblem (the maths lives once) ----

// Binning of precision T from numpy's edges; edges_t: the same edges in T (device or host).
template <typename T>
Binning<T> make_binning(const FrameProblem& p, const T* edges_t) {
    Binning<T> bin;
    const double rmin = p.edges[0], rmax = p.edges[p.nbins];
    bin.rmin = static_cast<T>(rmin);
    bin.rmax = static_cast<T>(rmax);
    bin.norm = static_cast<T>(p.nbins / (rmax - rmin));
    bin.nbins = p.nbins;
    // |error| of (r - rmin) * norm and of the edges in bin units is a few ulp of nbins.
    bin.near_delta = static_cast<T>(std::min(0.25, 1e-10 * (p.nbins + 1.0)));
    bin.edges = edges_t;
    return bin;
}

// Calls f(box) with the box object of the frame's kind, in precision T; images_t: the
// triclinic extra images in T (3 * p.n_images values, device or host).
template <typename T, class F>
void with_box(const FrameProblem& p, const T* images_t, F&& f) {
    if (p.box_kind == kNoBox) {
        f(NoBox<T>{});
    } else if (p.box_kind == kOrtho) {
        OrthoBox<T> box;
        for (int c = 0; c < 3; ++c) {
            box.l[c] = static_cast<T>(p.ortho[c]);
            box.inv[c] = static_cast<T>(1.0 / p.ortho[c]);
        }
        f(box);
    } else if (p.box_kind == kOrthoScaled) {
        OrthoBoxScaled<T> box;
        for (int c = 0; c < 3; ++c) {
            box.l[c] = static_cast<T>(p.ortho[c]);
            box.inv[c] = static_cast<T>(p.ortho_inv32[c]);
        }
        f(box);
    } else {
        auto fill = [&](auto& box) {
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 3; ++c) {
                    box.a[r][c] = static_cast<T>(p.basis[3 * r + c]);
                    box.f[r][c] = static_cast<T>(p.reciprocal[3 * r + c]);
                }
        };
        if (p.n_images == 0) {
            TriclinicBox<T, false> box;
            fill(box);
            f(box);
        } else {
            TriclinicBox<T, true> box;
            fill(box);
            box.images = images_t;
            box.n_images = p.n_images;
            f(box);
        }
    }
}

// The i == j pairs of a species with itself: distance exactly 0, excluded by any label.
// Added straight into out (host memory).
template <typename T>
void add_self_pairs(const FrameProblem& p, const Binning<T>& bin, uint64_t* out) {
    if (p.labels || !bin.in_range(T(0))) return;
    const int b0 = bin.exact_bin(T(0));
    for (int pair = 0; pair < p.n_pairs; ++pair) {
        const int a = p.pairs[2 * pair];
        if (a == p.pairs[2 * pair + 1])
            out[static_cast<std::size_t>(pair) * p.nbins + b0] +=
                static_cast<uint64_t>(p.offsets[a + 1] - p.offsets[a]);
    }
}

namespace cpu {
#define FASTRDF_DECLARE_ISA(isa) \
    namespace isa { void histogram_frame(const FrameProblem& p, Workspace& ws); }
FASTRDF_DECLARE_ISA(baseline)
FASTRDF_DECLARE_ISA(avx2)
FASTRDF_DECLARE_ISA(avx512)
FASTRDF_DECLARE_ISA(native)
#undef FASTRDF_DECLARE_ISA

// Cache-blocking tile edge from CADISHI Eq. 6 (../shared/papers/000_250f7fd1161c6543.txt):
//   L2 - reserve = 4 bs^2 + 2 * coord_bytes * bs + 4 * nbins, solved for bs.
std::size_t block_size(std::size_t l2_bytes, int nbins, int n_pairs);
}  // namespace cpu

}  // namespace fastrdf
