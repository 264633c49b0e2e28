// The interface between the engine (bindings) and the compiled kernels of one frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/cells.hpp"
#include "fastrdf/geometry.hpp"

namespace fastrdf {

// How a kernel finds the pairs: every pair, cell lists (cells.hpp), or whichever is expected
// to be faster for the frame.
enum Method : int { kMethodAuto = 0, kMethodAllPairs = 1, kMethodCells = 2 };

// The CUDA all-pairs kernel (gpu::KernelChoice, cuda.hpp): chosen per frame, 32-bit shared
// counters, 64-bit global atomics, packed 16-bit shared counters.
enum CudaKernel : int { kCudaAuto = 0, kCudaShared = 1, kCudaGlobal = 2, kCudaPacked = 3 };

// Cells per r_max of the cell lists (cell_k) go up to this (0: the CPU's choice of 1, 2, 3).
constexpr int kMaxCellK = 8;

// The names of the options as the Python API spells them, with their values. The bindings
// parse with these tables and export the names (METHODS, CELL_ORDERS, CUDA_KERNELS), from
// which the Python validators build their messages.
struct OptionName {
    const char* name;
    int value;
};
inline constexpr OptionName kMethodNames[] = {
    {"auto", kMethodAuto}, {"allpairs", kMethodAllPairs}, {"cells", kMethodCells}};
inline constexpr OptionName kCellOrderNames[] = {
    {"rowmajor", kOrderRowMajor}, {"morton", kOrderMorton}, {"hilbert", kOrderHilbert}};
inline constexpr OptionName kCudaKernelNames[] = {
    {"auto", kCudaAuto}, {"shared", kCudaShared}, {"packed", kCudaPacked}, {"global", kCudaGlobal}};

// "'a', 'b' or 'c'"
template <std::size_t N>
std::string option_list(const OptionName (&table)[N]) {
    std::string s;
    for (std::size_t k = 0; k < N; ++k)
        s += std::string(k == 0 ? "" : k + 1 == N ? " or " : ", ") + "'" + table[k].name + "'";
    return s;
}

// The value of option `what` called `name`; std::invalid_argument (a ValueError in Python)
// listing the names otherwise.
template <std::size_t N>
int option_value(const OptionName (&table)[N], const std::string& name, const char* what) {
    for (const OptionName& o : table)
        if (name == o.name) return o.value;
    throw std::invalid_argument(std::string(what) + ": must be " + option_list(table) + ", got '" +
                                name + "'");
}

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
    double slab_h = 0.0;              // slab kinds: largest |z| of a pair's image (Å)
    double slab_w = 0.0;              // slab kinds: 0 in-plane r2, 1 3D r2 (OrthoSlabBox)
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
    std::vector<int> thread_near;      // per thread: blocks of a row with pairs to settle
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
    // Double precision through the float filter (double_filter_delta): the bound is multiplied
    // by this (1; tests set 0 to run all in double, or shrink it to see the filter fail); the
    // last frame's bound in bin units (< 0: that frame ran all in double) and its pairs
    // recomputed in double.
    double double_filter = 1.0;
    double last_filter_delta = -1.0;
    std::atomic<uint64_t> settled{0};
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

// Double precision through a float filter (the CPU kernels; benchmarks/NOTES.md, "Double
// precision through a float filter"). double_filter_delta returns a bound, in bin units, on
// the difference between the float kernel's bin coordinate fl(fl(r32 - rmin) * norm32) and
// the exact coordinate of the double arithmetic, (r64 - rmin) * nbins / (rmax - rmin), or -1
// when the frame is to run all in double. A pair whose float coordinate lies further than the
// bound from every integer 0 .. nbins gets numpy's range decision and bin for r64 from the
// float kernel; the others are recomputed in double. Derivation: see docs/design.rst, section
// "The float filter's bound (double precision on the CPU)"; tests/kernels/test_double_filter.py
// measures the bound against a float32 replica of the kernels.

// What the bound needs from the frame's atoms: N_k, a bound on every pair's image index k,
// and the largest |coordinate|.
struct FrameImages {
    double n[3] = {0.0, 0.0, 0.0};
    double xmax = 0.0;
};

// The coefficients f_k of the index arguments f_k . x (rows; 1 / L_c on the diagonal of an
// orthorhombic box, zero without a box).
inline void image_coefficients(const FrameProblem& p, double (&f)[3][3]) {
    for (int k = 0; k < 3; ++k)
        for (int c = 0; c < 3; ++c) f[k][c] = 0.0;
    if (p.box_kind == kOrtho || p.box_kind == kOrthoScaled || p.box_kind == kOrthoSlab) {
        for (int c = 0; c < 3; ++c) f[c][c] = 1.0 / p.ortho[c];
    } else if (is_triclinic_kind(p.box_kind)) {
        for (int k = 0; k < 3; ++k)
            for (int c = 0; c < 3; ++c) f[k][c] = p.reciprocal[3 * k + c];
    }
}

// N_k from the lowest and highest f_k . x over the atoms (each f[k][0] * x + f[k][1] * y +
// f[k][2] * z in double, as frame_images computes it), and the largest |coordinate|.
inline FrameImages frame_images_from(const double (&lo)[3], const double (&hi)[3], double xmax) {
    FrameImages fi;
    for (int k = 0; k < 3; ++k) fi.n[k] = (hi[k] - lo[k]) * (1.0 + 0x1p-20) + 0.5;
    fi.xmax = xmax;
    return fi;
}

// One pass over the frame's atoms: N_k = spread_k (1 + 2^-20) + 1/2 from the spread of the
// index arguments f_k . x (x_c / L_c in an orthorhombic box); see docs/design.rst, section
// "The float filter's bound (double precision on the CPU)". (The CUDA engine takes the same
// spread while it packs the frame, and frame_images_from.)
inline FrameImages frame_images(const FrameProblem& p) {
    FrameImages fi;
    const int64_t n_atoms = p.offsets[p.n_species];
    if (n_atoms == 0) return fi;
    double f[3][3];
    image_coefficients(p, f);
    double lo[3], hi[3];
    for (int k = 0; k < 3; ++k) lo[k] = hi[k] = f[k][0] * p.x[0] + f[k][1] * p.y[0] + f[k][2] * p.z[0];
    for (int64_t a = 0; a < n_atoms; ++a) {
        const double x = p.x[a], y = p.y[a], z = p.z[a];
        fi.xmax = std::max({fi.xmax, std::fabs(x), std::fabs(y), std::fabs(z)});
        for (int k = 0; k < 3; ++k) {
            const double v = f[k][0] * x + f[k][1] * y + f[k][2] * z;
            lo[k] = std::min(lo[k], v);
            hi[k] = std::max(hi[k], v);
        }
    }
    return frame_images_from(lo, hi, fi.xmax);
}

// The largest distance between the float kernels' lattice shift and the exact one over the
// image indices the frame's pairs can take (|n_k| <= floor(N_k)), every index tried: the float
// shift as geometry.hpp's shift() makes it (the basis rounded to float, products and sums in
// float; the sums in each of their three orders), the exact one as sum_k n_k a_k in double,
// plus a bound on the rounding of that double and of the double kernel's own shift. -1 for
// MDAnalysis's scaled form (no shift of its own) and when there are too many indices to try:
// the caller then takes the analytic bound. See docs/design.rst, section "The float filter's
// bound (double precision on the CPU)".
inline double shift_error(const FrameProblem& p, const FrameImages& fi) {
    constexpr double ud = 0x1p-53;
    if (p.box_kind == kNoBox) return 0.0;
    double m[3];
    for (int k = 0; k < 3; ++k) {
        m[k] = std::floor(fi.n[k]);
        if (!(m[k] <= 1024.0)) return -1.0;
    }
    if (p.box_kind == kOrtho || p.box_kind == kOrthoSlab) {  // s_c = L_c n_c, one product
        double e2 = 0.0;
        for (int c = 0; c < 3; ++c) {
            const float l = static_cast<float>(p.ortho[c]);
            double worst = 0.0;
            for (double n = -m[c]; n <= m[c]; n += 1.0) {
                const float s32 = l * static_cast<float>(n);
                worst = std::max(worst, std::fabs(static_cast<double>(s32) - p.ortho[c] * n));
            }
            const double e = worst * (1.0 + 0x1p-40) + 4.0 * ud * m[c] * p.ortho[c];
            e2 += e * e;
        }
        return std::sqrt(e2);
    }
    if (!is_triclinic_kind(p.box_kind)) return -1.0;
    if ((2.0 * m[0] + 1.0) * (2.0 * m[1] + 1.0) * (2.0 * m[2] + 1.0) > 4096.0) return -1.0;
    float a32[3][3];
    double aabs = 0.0;  // sum_k floor(N_k) |a_k|_1
    for (int k = 0; k < 3; ++k)
        for (int c = 0; c < 3; ++c) {
            a32[k][c] = static_cast<float>(p.basis[3 * k + c]);
            aabs += m[k] * std::fabs(p.basis[3 * k + c]);
        }
    double worst = 0.0;
    for (double n0 = -m[0]; n0 <= m[0]; n0 += 1.0)
        for (double n1 = -m[1]; n1 <= m[1]; n1 += 1.0)
            for (double n2 = -m[2]; n2 <= m[2]; n2 += 1.0) {
                const float f0 = static_cast<float>(n0), f1 = static_cast<float>(n1), f2 = static_cast<float>(n2);
                double e2 = 0.0;
                for (int c = 0; c < 3; ++c) {
                    const float q0 = f0 * a32[0][c], q1 = f1 * a32[1][c], q2 = f2 * a32[2][c];
                    const double s64 = n0 * p.basis[c] + n1 * p.basis[3 + c] + n2 * p.basis[6 + c];
                    const float s32[3] = {(q0 + q1) + q2, (q0 + q2) + q1, (q1 + q2) + q0};
                    double e = 0.0;
                    for (float v : s32) e = std::max(e, std::fabs(static_cast<double>(v) - s64));
                    e2 += e * e;
                }
                worst = std::max(worst, std::sqrt(e2));
            }
    return worst * (1.0 + 0x1p-40) + 8.0 * ud * aabs;
}

// The float arithmetic a bound of double_filter_delta covers. root_u: the relative error of
// the square root in units of u = 2^-24 (1: correctly rounded, as on the CPU; the GPU filter
// from 0 takes the hardware's approximate root and the error measured on its device,
// sqrt_approx_error). coord_u: the relative error of the bin coordinate from r, in u (3 covers
// the CPU's fl(fl(r - rmin) norm32): norm32's rounding and the product's, with room; 2 the GPU
// filter's fused r * norm32 from 0, whose only rounding is norm32's). See docs/design.rst,
// section "The float filter's bound".
// slab: whether the kernels flag the pairs near the slab's edge (slab_filter_band: the CPU);
// without, slab frames run all in double.
struct FilterArithmetic {
    double root_u = 1.0;
    double coord_u = 3.0;
    bool slab = false;
};

// Largest Euclidean distance between the float kernels' lattice shift and the exact one (the
// tried shift_error, else the analytic 4u sum_k N_k |a_k|_1), and the largest extra image.
inline double shift_bound(const FrameProblem& p, const FrameImages& fi, double& img_max) {
    constexpr double u = 0x1p-24;
    double img = 0.0;  // sum_k N_k |a_k|_1
    img_max = 0.0;
    if (p.box_kind == kOrtho || p.box_kind == kOrthoScaled || p.box_kind == kOrthoSlab) {
        // one product per component: L n off by <= 2u |n| L, and MDAnalysis's scaled form's
        // u |d_c| <= 2u N_c L_c
        for (int c = 0; c < 3; ++c) img += 0.5 * fi.n[c] * p.ortho[c];
    } else if (is_triclinic_kind(p.box_kind)) {
        for (int k = 0; k < 3; ++k) {
            const double* a = p.basis + 3 * k;
            img += fi.n[k] * (std::fabs(a[0]) + std::fabs(a[1]) + std::fabs(a[2]));
        }
        for (int i = 0; i < p.n_images; ++i) {
            const double* v = p.images + 3 * i;
            img_max = std::max(img_max, std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]));
        }
    }
    const double e_try = shift_error(p, fi);
    return e_try >= 0.0 ? e_try : 4.0 * u * img;
}

// The band of the slab test for double precision through the float filter (docs/design.rst,
// section "The slab metric"): a bound, doubled, on the difference between the float kernel's
// |z| of an image and the exact one, plus float(h)'s rounding; an image whose float |z| lies
// within it of float(h) is flagged (slab_norm2) and its pair recomputed in double. -1 when
// the frame has no slab, or the band would reach h / 4 (then the frame runs all in double).
inline double slab_filter_band(const FrameProblem& p, const FrameImages& fi) {
    constexpr double u = 0x1p-24;
    if (!is_slab_kind(p.box_kind)) return -1.0;
    const double h = p.slab_h;
    if (!(h > 0.0) || !(h < 1e15) || !(fi.xmax < 1e15)) return -1.0;
    double img_max = 0.0;
    const double e_s = shift_bound(p, fi, img_max);
    // the shift, the subtractions d - s and (extra images) d' - img at |z| ~ h, float(h),
    // and double's own rounding
    const double e_z = e_s + 6.0 * u * img_max + 4.0 * u * h + 8.0 * 0x1p-52 * (img_max + h) + 1e-18;
    const double band = 2.0 * e_z;
    return band < 0.25 * h ? band : -1.0;
}

inline double double_filter_delta(const FrameProblem& p, const FrameImages& fi,
                                  const FilterArithmetic& arith = FilterArithmetic{}) {
    constexpr double u = 0x1p-24;
    // the slab's own decision |z| <= h: flagged by slab_filter_band's band where the kernels
    // apply it (arith.slab, the CPU); elsewhere slab frames run all in double (docs/design.rst,
    // section "The slab metric")
    if (is_slab_kind(p.box_kind) && !(arith.slab && slab_filter_band(p, fi) >= 0.0)) return -1.0;
    const double rmin = p.edges[0], rmax = p.edges[p.nbins];
    const double norm = p.nbins / (rmax - rmin);
    const double rabs = std::max(std::fabs(rmin), std::fabs(rmax));
    // float r2 of any pair stays finite (|d_c| <= 2 xmax)
    if (!(fi.xmax < 1e15) || !(rabs < 1e15) || !std::isfinite(norm)) return -1.0;
    double img_max = 0.0;
    // the terms in r: sum of squares and root 2.6u, the image's subtractions sqrt(3) u
    // (orthorhombic, its slab form), 3 sqrt(3) u (MDAnalysis's scaled form), 2 sqrt(3) u
    // (triclinic, its slab form)
    const double kr = p.box_kind == kNoBox ? 2.7
                      : (p.box_kind == kOrtho || p.box_kind == kOrthoSlab) ? 4.4
                      : p.box_kind == kOrthoScaled ? 7.9 : 6.2;
    // (a root less exact than the correctly rounded one adds its excess)
    const double kr_root = kr + std::max(arith.root_u - 1.0, 0.0);
    const double r = rabs + 1.0 / norm;
    // the shift: tried over the frame's image indices (shift_error), else the analytic 4u img
    const double e_shift = shift_bound(p, fi, img_max);
    const double e_r = e_shift + 6.0 * u * img_max + kr_root * u * r + 1e-18;
    const double delta = 2.0 * (norm * e_r + arith.coord_u * u * (p.nbins + 1.0) + u * std::fabs(rmin) * norm +
                                8.0 * 0x1p-52 * rabs * norm + 1e-10 * (p.nbins + 1.0));
    return delta < 0.1 ? delta : -1.0;
}

// The box object of each kind in precision T, from the frame's box (images_t: the triclinic
// extra images in T, 3 * p.n_images values, device or host).
template <typename T, bool Slab = false>
OrthoLattice<T, Slab> make_ortho(const FrameProblem& p) {
    OrthoLattice<T, Slab> box;
    for (int c = 0; c < 3; ++c) {
        box.l[c] = static_cast<T>(p.ortho[c]);
        box.inv[c] = static_cast<T>(1.0 / p.ortho[c]);
    }
    if constexpr (Slab) {
        box.h = static_cast<T>(p.slab_h);
        box.w = static_cast<T>(p.slab_w);
    }
    return box;
}
template <typename T>
OrthoBoxScaled<T> make_ortho_scaled(const FrameProblem& p) {
    OrthoBoxScaled<T> box;
    for (int c = 0; c < 3; ++c) {
        box.l[c] = static_cast<T>(p.ortho[c]);
        box.inv[c] = static_cast<T>(p.ortho_inv32[c]);
    }
    return box;
}
template <typename T, bool Multi, bool Slab = false>
TriclinicBox<T, Multi, Slab> make_triclinic(const FrameProblem& p, const T* images_t) {
    TriclinicBox<T, Multi, Slab> box;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) {
            box.a[r][c] = static_cast<T>(p.basis[3 * r + c]);
            box.f[r][c] = static_cast<T>(p.reciprocal[3 * r + c]);
        }
    if (Multi) {
        box.images = images_t;
        box.n_images = p.n_images;
    }
    if constexpr (Slab) {
        box.h = static_cast<T>(p.slab_h);
        box.w = static_cast<T>(p.slab_w);
    }
    return box;
}

// Calls f(box...) with the box object of the frame's kind in each precision Ts (one argument
// per precision, the same box kind); images: the triclinic extra images in each precision.
// Slab: whether f is instantiated for the slab boxes (kernels without them, the float filter
// and the site histograms, throw for those kinds; the callers never send them there).
// SlabNoImages: a triclinic slab frame without extra images gets TriclinicBox<T, false, true>
// (the CPU, whose row loops then vectorise), else always TriclinicBox<T, true, true> (the GPU:
// a loop of no iterations costs it nothing, and a kernel variant less is build time saved).
template <bool Slab = true, bool SlabNoImages = true, class F, typename... Ts>
void with_boxes(const FrameProblem& p, F&& f, const Ts*... images) {
    if (p.box_kind == kNoBox) {
        f(NoBox<Ts>{}...);
    } else if (p.box_kind == kOrtho) {
        f(make_ortho<Ts>(p)...);
    } else if (p.box_kind == kOrthoScaled) {
        f(make_ortho_scaled<Ts>(p)...);
    } else if (is_slab_kind(p.box_kind)) {
        if constexpr (Slab) {
            if (p.box_kind == kOrthoSlab) {
                f(make_ortho<Ts, true>(p)...);
            } else if (p.n_images == 0) {
                if constexpr (SlabNoImages)
                    f(make_triclinic<Ts, false, true>(p, images)...);
                else
                    f(make_triclinic<Ts, true, true>(p, images)...);
            } else {
                f(make_triclinic<Ts, true, true>(p, images)...);
            }
        } else {
            throw std::invalid_argument("box_kind: the slab boxes have no kernel of this kind");
        }
    }
    else if (p.n_images == 0)
        f(make_triclinic<Ts, false>(p, images)...);
    else
        f(make_triclinic<Ts, true>(p, images)...);
}

// Calls f(box) with the box object of the frame's kind, in precision T.
template <typename T, bool Slab = true, bool SlabNoImages = true, class F>
void with_box(const FrameProblem& p, const T* images_t, F&& f) {
    with_boxes<Slab, SlabNoImages>(p, std::forward<F>(f), images_t);
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

// Cache-blocking tile edge from CADISHI Eq. 6 (K. Reuter & J. Köfinger, Comput. Phys. Commun.
// 236, 274 (2019), doi:10.1016/j.cpc.2018.10.018):
//   L2 - reserve = 4 bs^2 + 2 * coord_bytes * bs + 4 * nbins, solved for bs.
std::size_t block_size(std::size_t l2_bytes, int nbins, int n_pairs);
}  // namespace cpu

}  // namespace fastrdf
