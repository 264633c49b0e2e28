// Box geometry and bin index: the maths every kernel shares.
//
// This header is written once for all devices: it compiles as plain C++ for the CPU kernels
// and as CUDA (FASTRDF_HD = __host__ __device__) for the GPU kernels, so both compute the
// same distance and the same bin, bit for bit, as long as neither side contracts a*b+c into
// an FMA or uses fast-math (CMake sets -ffp-contract=off; nvcc gets --fmad=false).
//
// Conventions (CADISHI Eq. 5: K. Reuter & J. Köfinger, Comput. Phys. Commun. 236, 274 (2019),
// doi:10.1016/j.cpc.2018.10.018):
//   * coordinates are float32 (as MDAnalysis stores them); the difference of two coordinates
//     is taken in float32, then widened to the working precision T, exactly as MDAnalysis's
//     distance code does (float - float, stored into a double);
//   * the minimum image takes the lattice shift s = B nint(B^-1 d), with B a *reduced* basis
//     of the box lattice; for a triclinic box a short list of extra lattice vectors
//     ("images", built on the host by box_setup.hpp) makes the result exact for every
//     distance up to r_max; the image is d' = d - s in both precisions, which keeps
//     r2(i, j) == r2(j, i) bit for bit (see docs/design.rst, section "Symmetry of the
//     minimum image");
//   * bins follow numpy.histogram: range [rmin, rmax], last bin closed on the right.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define FASTRDF_HD __host__ __device__ __forceinline__
#else
#define FASTRDF_HD inline
#endif

namespace fastrdf {

enum BoxKind : int { kNoBox = 0, kOrtho = 1, kTriclinic = 2, kOrthoScaled = 3, kOrthoSlab = 4, kTriclinicSlab = 5 };

// Box kinds whose lattice is a triclinic reduced basis (the slab one too).
inline bool is_triclinic_kind(int kind) { return kind == kTriclinic || kind == kTriclinicSlab; }
// Box kinds with a slab condition (OrthoSlabBox, TriclinicBox<T, M, true>).
inline bool is_slab_kind(int kind) { return kind == kOrthoSlab || kind == kTriclinicSlab; }

// Round to nearest, ties to even: (x + M) - M with M = 1.5 * 2^(digits - 1), for |x| < 2^22
// in float and 2^51 in double (the callers keep coordinates within 2^20 box widths of the
// origin); one rintf on the GPU in float. Why this is exact: see docs/design.rst, section
// "Rounding to an integer and truncation".
template <typename T>
struct RoundMagic;
template <>
struct RoundMagic<float> {
    static constexpr float value = 12582912.0f;  // 1.5 * 2^23
};
template <>
struct RoundMagic<double> {
    static constexpr double value = 6755399441055744.0;  // 1.5 * 2^52
};

template <typename T>
FASTRDF_HD T nint(T x) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same<T, float>::value) return rintf(x);
#endif
    return (x + RoundMagic<T>::value) - RoundMagic<T>::value;
}

// Largest |coordinate| / (smallest box length) for which nint() is exact in float.
constexpr double kMaxBoxMultiples = 1048576.0;  // 2^20

// trunc(f) for 0 <= f < 2^22 as an int, bit for bit static_cast<int>(f); on the GPU one
// addition rounded toward zero and an integer subtraction instead of the conversion unit
// (see docs/design.rst, section "Rounding to an integer and truncation").
FASTRDF_HD int trunc_nonneg(float f) {
#if defined(__CUDA_ARCH__)
    return static_cast<int>(__float_as_uint(__fadd_rz(f, 8388608.0f)) - 0x4B000000u);
#else
    return static_cast<int>(f);
#endif
}
FASTRDF_HD int trunc_nonneg(double f) { return static_cast<int>(f); }

template <typename T>
FASTRDF_HD T norm2(T x, T y, T z) {
    return x * x + y * y + z * z;  // summation order fixed (same as MDAnalysis)
}

// No periodic boundaries.
template <typename T>
struct NoBox {
    FASTRDF_HD T dist2(T dx, T dy, T dz) const { return norm2(dx, dy, dz); }
};

// Periodic boxes take the minimum image in three steps: index(d, n) gives the integer image
// indices n of a displacement d = (dx, dy, dz), shift(n, s) the lattice shift s they stand
// for, and reduce(d, s) applies it and returns r2; dist2(d) = reduce(d, shift(index(d))).
// norm() is the r2 of a displacement already in the centred cell (with the extra images of a
// triclinic box), reduce(d, s) = norm(d - s).
// common_image(lo, hi, s): true when the extreme corners of the box of displacements
// [lo, hi] get the same indices; then every displacement in the box gets them, and
// reduce(d, s) gives dist2(d) bit for bit (see docs/design.rst, section "One image for a box
// of displacements"). The kernels use it for chunks of j atoms (benchmarks/NOTES.md, GPU
// item 16). Argument order is fixed (x, y, z) and no step may be contracted or reassociated,
// as everywhere in this header.

// dist2 from a box's index, shift and reduce (CRTP: written once for every periodic box).
template <class Box, typename T>
struct PeriodicImage {
    FASTRDF_HD T dist2(T dx, T dy, T dz) const {
        const Box& box = static_cast<const Box&>(*this);
        T n[3], s[3];
        box.index(dx, dy, dz, n);
        box.shift(n, s);
        return box.reduce(dx, dy, dz, s);
    }
};

// r2 of atoms i and j (float32 coordinates) in any box: the float difference, widened to T.
template <class Box, typename T = decltype(Box{}.dist2(0.0f, 0.0f, 0.0f))>
FASTRDF_HD T pair_dist2(const Box& box, float xi, float yi, float zi, float xj, float yj, float zj) {
    return box.dist2(static_cast<T>(xj - xi), static_cast<T>(yj - yi), static_cast<T>(zj - zi));
}

// Boxes whose index c rises with component c alone (the orthorhombic forms: inv > 0): the
// corners are lo and hi themselves.
// common_axes: bit c set when every displacement of the box takes the index of lo along axis
// c (s: the shift of lo's indices).
template <class Box, typename T>
struct AxisImage : PeriodicImage<Box, T> {
    FASTRDF_HD unsigned common_axes(const T (&lo)[3], const T (&hi)[3], T (&s)[3]) const {
        const Box& box = static_cast<const Box&>(*this);
        T a[3], b[3];
        box.index(lo[0], lo[1], lo[2], a);
        box.index(hi[0], hi[1], hi[2], b);
        box.shift(a, s);
        return static_cast<unsigned>(a[0] == b[0]) | (static_cast<unsigned>(a[1] == b[1]) << 1) |
               (static_cast<unsigned>(a[2] == b[2]) << 2);
    }
    FASTRDF_HD bool common_image(const T (&lo)[3], const T (&hi)[3], T (&s)[3]) const {
        return common_axes(lo, hi, s) == 7u;
    }
};

// The slab metric (LateralRDF's slab, docs/design.rst, section "The slab metric"): a pair's
// image counts only when its z component (the plane's normal; the host makes it z) lies in
// [-h, h]; its r2 is then the in-plane x^2 + y^2 (w = 0) or the whole x^2 + y^2 + z^2
// (w = 1), and +inf (out of every range) otherwise. w * z is exactly z or 0, so the r2 is
// norm2's, the same sum as the 3D r2 (w = 1) or as in-plane positions (w = 0) give.
// band (the CPU's double precision through the float filter, slab_filter_band in
// kernel_api.hpp; 0 elsewhere): an image whose |z| lies within `band` of h gives -1, a value
// no r2 takes, which every least over images keeps and the filter recomputes in double.
// (|z| - h is exact by Sterbenz where it is below h / 2, and band < h / 4.) Device code
// never has a band and omits the test.
template <typename T>
FASTRDF_HD T slab_norm2(T x, T y, T z, T h, T w, T band) {
    const T r2 = norm2(x, y, w * z);
    const T v = (z <= h) & (z >= -h) ? r2 : static_cast<T>(INFINITY);
#if defined(__CUDA_ARCH__)
    (void)band;
    return v;
#else
    const T e = std::fabs(z) - h;
    return (e < band) & (e > -band) ? T(-1) : v;
#endif
}

// Orthorhombic box: the per-axis minimum image is exact for any separation.
// axis_reduced(c, d): component c of the minimum image of d, as dist2 computes it (the GPU
// kernels take it for one axis alone: benchmarks/NOTES.md, GPU item 17).
// Slab: the slab metric (slab_norm2) instead of norm2 in norm(); OrthoBox and OrthoSlabBox
// below are the two, distinct types, so that the GPU's per-axis and dense paths, which test
// for OrthoBox by type, never take the slab. Every image path of every kernel reaches the r2
// through reduce/norm.
template <typename T, bool Slab>
struct OrthoLattice : AxisImage<OrthoLattice<T, Slab>, T> {
    T l[3];
    T inv[3];
    T h = 0;  // Slab: largest |z| of a pair's image
    T w = 0;  // Slab: 0 in-plane r2, 1 3D r2
    T band = 0;  // Slab: the float filter's band around h (slab_norm2)
    FASTRDF_HD T axis_index(int c, T d) const { return nint(d * inv[c]); }
    FASTRDF_HD T axis_shift(int c, T n) const { return l[c] * n; }
    FASTRDF_HD T axis_reduced(int c, T d) const { return d - axis_shift(c, axis_index(c, d)); }
    FASTRDF_HD void index(T dx, T dy, T dz, T (&n)[3]) const {
        n[0] = axis_index(0, dx);
        n[1] = axis_index(1, dy);
        n[2] = axis_index(2, dz);
    }
    FASTRDF_HD void shift(const T (&n)[3], T (&s)[3]) const {
        s[0] = axis_shift(0, n[0]);
        s[1] = axis_shift(1, n[1]);
        s[2] = axis_shift(2, n[2]);
    }
    FASTRDF_HD T norm(T x, T y, T z) const {
        if constexpr (Slab)
            return slab_norm2(x, y, z, h, w, band);
        else
            return norm2(x, y, z);
    }
    FASTRDF_HD T reduce(T dx, T dy, T dz, const T (&s)[3]) const {
        return norm(dx - s[0], dy - s[1], dz - s[2]);
    }
};
template <typename T>
using OrthoBox = OrthoLattice<T, false>;
template <typename T>
using OrthoSlabBox = OrthoLattice<T, true>;

// Round half away from zero (C's round()), written with selects so that it vectorises.
template <typename T>
FASTRDF_HD T round_half_away(T x) {
    const T t = std::trunc(x);
    const T d = x - t;  // exact
    return d >= T(0.5) ? t + T(1) : (d <= T(-0.5) ? t - T(1) : t);
}

// MDAnalysis's brute-force orthorhombic minimum image, d = L (s - round(s)) with s = inv32 d
// and inv32 = float(1/L). Because L * inv32 != 1 it scales every component by up to 2^-24;
// InterRDF's distances carry that scaling whenever MDAnalysis picks its brute-force search
// (a group of fewer than 10 atoms, or r_max > 0.3 L), so the same formula reproduces them.
// Its "shift" is the rounded index itself, which reduce() subtracts from s.
template <typename T>
struct OrthoBoxScaled : AxisImage<OrthoBoxScaled<T>, T> {
    T l[3];
    T inv[3];  // float(1 / L), widened to T
    FASTRDF_HD void index(T dx, T dy, T dz, T (&n)[3]) const {
        n[0] = round_half_away(dx * inv[0]);
        n[1] = round_half_away(dy * inv[1]);
        n[2] = round_half_away(dz * inv[2]);
    }
    FASTRDF_HD void shift(const T (&n)[3], T (&s)[3]) const {
        s[0] = n[0];
        s[1] = n[1];
        s[2] = n[2];
    }
    FASTRDF_HD T reduce(T dx, T dy, T dz, const T (&s)[3]) const {
        dx = l[0] * (dx * inv[0] - s[0]);
        dy = l[1] * (dy * inv[1] - s[1]);
        dz = l[2] * (dz * inv[2] - s[2]);
        return norm2(dx, dy, dz);
    }
};

// General triclinic box given by a reduced basis a[k] (rows) and its reciprocal vectors
// f[k] (f[k] . a[l] = delta_kl). d -> d - sum_k nint(f[k].d) a[k] moves d into the centred
// cell; with MultiImage, norm() takes the least r2 over the extra images the host listed
// (box_setup.hpp; see docs/design.rst, section "Extra images of a triclinic box").
// Slab: the slab metric of OrthoSlabBox on every image, the least r2 over the images in the
// slab |z| <= h (MDAnalysis's a and b lie in the xy plane, so z is the plane's normal); the
// host lists the images up to sqrt(rmax^2 + h^2) (w = 0) or rmax (w = 1).
template <typename T, bool MultiImage, bool Slab = false>
struct TriclinicBox : PeriodicImage<TriclinicBox<T, MultiImage, Slab>, T> {
    T a[3][3];
    T f[3][3];
    const T* images = nullptr;  // 3 * n_images lattice vectors (x, y, z), zero vector excluded
    int n_images = 0;
    T h = 0;  // Slab: as in OrthoSlabBox
    T w = 0;
    T band = 0;

    // index k of d from the coefficients c = f[k] (kept in registers by a caller that wants
    // one index only: the same rounding as index())
    FASTRDF_HD static T index_with(const T (&c)[3], T dx, T dy, T dz) {
        return nint(c[0] * dx + c[1] * dy + c[2] * dz);
    }
    FASTRDF_HD void index(T dx, T dy, T dz, T (&n)[3]) const {
        n[0] = index_with(f[0], dx, dy, dz);
        n[1] = index_with(f[1], dx, dy, dz);
        n[2] = index_with(f[2], dx, dy, dz);
    }
    FASTRDF_HD void shift(const T (&n)[3], T (&s)[3]) const {
        s[0] = n[0] * a[0][0] + n[1] * a[1][0] + n[2] * a[2][0];
        s[1] = n[0] * a[0][1] + n[1] * a[1][1] + n[2] * a[2][1];
        s[2] = n[0] * a[0][2] + n[1] * a[1][2] + n[2] * a[2][2];
    }
    // r2 of a displacement in the centred cell: the least over the extra images too
    // r2 of one image: norm2, or the slab metric (slab_norm2)
    FASTRDF_HD T metric(T x, T y, T z) const {
        if constexpr (Slab)
            return slab_norm2(x, y, z, h, w, band);
        else
            return norm2(x, y, z);
    }
    FASTRDF_HD T norm(T x, T y, T z) const {
        T best = metric(x, y, z);
        if (MultiImage) {
            for (int m = 0; m < n_images; ++m) {
                const T d2 = metric(x - images[3 * m], y - images[3 * m + 1], z - images[3 * m + 2]);
                best = d2 < best ? d2 : best;
            }
        }
        return best;
    }
    FASTRDF_HD T reduce(T dx, T dy, T dz, const T (&s)[3]) const {
        return norm(dx - s[0], dy - s[1], dz - s[2]);
    }
    // Lowest (a) and highest (b) index k over the box of displacements [lo, hi]: index k falls
    // with component c where f[k][c] < 0, so its lowest value is at the corner taking hi there
    // and lo elsewhere (f[k][c] == -0 multiplies to a zero either way).
    FASTRDF_HD void index_bounds(const T (&lo)[3], const T (&hi)[3], T (&a)[3], T (&b)[3]) const {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int k = 0; k < 3; ++k) {
            const bool px = f[k][0] >= T(0), py = f[k][1] >= T(0), pz = f[k][2] >= T(0);
            a[k] = index_with(f[k], px ? lo[0] : hi[0], py ? lo[1] : hi[1], pz ? lo[2] : hi[2]);
            b[k] = index_with(f[k], px ? hi[0] : lo[0], py ? hi[1] : lo[1], pz ? hi[2] : lo[2]);
        }
    }
    FASTRDF_HD bool common_image(const T (&lo)[3], const T (&hi)[3], T (&s)[3]) const {
        T a[3], b[3];
        index_bounds(lo, hi, a, b);
        shift(a, s);
        return (a[0] == b[0]) & (a[1] == b[1]) & (a[2] == b[2]);
    }

    // A tighter test than common_image for sets of atoms in a sheared cell (host code): the
    // exact projections f[k] . (xj - xi) of every pair lie in [plo[k], phi[k]] (from
    // projection(), up to perr[k]; see the caller), and |xj - xi| <= dmax per component. The
    // interval, widened by 2^-20 sum_c |f[k][c]| dmax[c] (the kernels' rounding of the index
    // argument) and perr[k], must lie strictly inside (n - 1/2, n + 1/2): see docs/design.rst,
    // section "One image for a box of displacements" (projected test).
    bool common_image_projected(const double (&plo)[3], const double (&phi)[3],
                                const double (&perr)[3], const double (&dmax)[3], T (&s)[3]) const {
        T n[3];
        for (int k = 0; k < 3; ++k) {
            const double e = 0x1p-20 * (std::fabs(double(f[k][0])) * dmax[0] +
                                        std::fabs(double(f[k][1])) * dmax[1] +
                                        std::fabs(double(f[k][2])) * dmax[2]) + perr[k];
            const double lo = plo[k] - e, hi = phi[k] + e;
            const double m = std::floor(0.5 * (lo + hi) + 0.5);
            if (!(m - 0.5 < lo && hi < m + 0.5)) return false;
            n[k] = static_cast<T>(m);
        }
        shift(n, s);
        return true;
    }
    // f[k] . x in double (exact products for T = float; error below 2^-50 sum_c |f[k][c] x_c|)
    double projection(int k, float x, float y, float z) const {
        return double(f[k][0]) * double(x) + double(f[k][1]) * double(y) + double(f[k][2]) * double(z);
    }
};

// The boxes with the slab metric (slab_norm2).
template <class Box>
constexpr bool is_slab_box = false;
template <typename T>
constexpr bool is_slab_box<OrthoLattice<T, true>> = true;
template <typename T, bool M>
constexpr bool is_slab_box<TriclinicBox<T, M, true>> = true;

template <class Box>
constexpr bool is_triclinic = false;
template <typename T, bool M, bool S>
constexpr bool is_triclinic<TriclinicBox<T, M, S>> = true;

// Triclinic boxes whose norm() takes the least over extra images: the CPU row loops take the
// images one by one across a row's pairs instead (histogram.cpp, sites.cpp), so that they
// vectorise; the same r2 bit for bit.
template <class Box>
constexpr bool has_extra_images = false;
template <typename T, bool S>
constexpr bool has_extra_images<TriclinicBox<T, true, S>> = true;

// Boxes with norm() (OrthoBox, TriclinicBox): reduce(d, s) is norm(d - s), so a shift of 0
// for every pair of a chunk leaves norm(d), the no-box arithmetic (plus a triclinic box's
// extra images). Not the MDAnalysis-scaled form, whose image rescales d whatever the shift.
template <class Box, class = void>
struct has_norm : std::false_type {};
template <class Box>
struct has_norm<Box, std::void_t<decltype(&Box::norm)>> : std::true_type {};

// Bin index exactly as numpy.histogram computes it for uniform bins.
template <typename T>
struct Binning {
    T rmin;
    T rmax;
    T norm;          // nbins / (rmax - rmin), computed in double then rounded to T
    T near_delta;    // fraction of a bin within which the fast index may disagree with numpy
    int nbins;
    const T* edges;  // nbins + 1 edges (numpy's linspace), used to settle pairs near an edge

    FASTRDF_HD bool in_range(T r) const { return (r >= rmin) & (r <= rmax); }

    // Position of r in bin units, (r - rmin) * norm; r must be in range.
    FASTRDF_HD T coordinate(T r) const { return (r - rmin) * norm; }

    // Fast index from the bin coordinate f (clamped for r == rmax).
    FASTRDF_HD int fast_bin_of(T f) const {
        const int k = trunc_nonneg(f);  // f >= 0 for r in range; nbins < 2^22 (checked)
        return k < nbins ? k : nbins - 1;
    }
    FASTRDF_HD int fast_bin(T r) const { return fast_bin_of(coordinate(r)); }

    // True when f is so close to an integer that rounding could put the fast index one bin
    // off numpy's. (Written with a select rather than || so that it vectorises.)
    FASTRDF_HD bool near_edge(T f, int k) const {
        const T frac = f - static_cast<T>(k);
        const T gap = frac < T(1) - frac ? frac : T(1) - frac;
        return gap < near_delta;
    }

    // numpy.histogram's correction of the fast index against the edges, in the same order.
    FASTRDF_HD int exact_bin(T r) const {
        int k = fast_bin(r);
        if (r < edges[k]) --k;
        if (r >= edges[k + 1] && k != nbins - 1) ++k;
        return k;
    }
};

}  // namespace fastrdf
