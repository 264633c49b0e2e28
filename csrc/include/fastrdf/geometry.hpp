// Box geometry and bin index: the maths every kernel shares.
//
// This header is written once for all devices: it compiles as plain C++ for the CPU kernels
// and as CUDA (FASTRDF_HD = __host__ __device__) for the GPU kernels, so both compute the
// same distance and the same bin, bit for bit, as long as neither side contracts a*b+c into
// an FMA or uses fast-math (CMake sets -ffp-contract=off; nvcc gets --fmad=false).
//
// Conventions (CADISHI, ../shared/papers/000_250f7fd1161c6543.txt Eq. 5):
//   * coordinates are float32 (as MDAnalysis stores them); the difference of two coordinates
//     is taken in float32, then widened to the working precision T, exactly as MDAnalysis's
//     distance code does (float - float, stored into a double);
//   * the minimum image is d' = d - B nint(B^-1 d), with B a *reduced* basis of the box
//     lattice; for a triclinic box a short list of extra lattice vectors ("images", built on
//     the host by box_setup.hpp) makes the result exact for every distance up to r_max;
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

enum BoxKind : int { kNoBox = 0, kOrtho = 1, kTriclinic = 2, kOrthoScaled = 3 };

// Round to nearest, ties to even: (x + M) - M with M = 1.5 * 2^(digits - 1) rounds the
// fraction away in the addition (IEEE round-to-nearest-even) for |x| < 2^(digits - 2), i.e.
// |x| < 2^22 in float and 2^51 in double. Two additions on the CPU; in float on the GPU one
// FRND (rintf: round to nearest, ties to even, so the same integer for |x| < 2^22; only the
// sign of a zero result can differ, which no distance sees), as the kernels are bound by
// issue slots and FRND takes one where the additions take two (benchmarks/NOTES.md, GPU
// item 15). The callers guarantee the range: coordinates are checked to lie within 2^20 box
// widths of the origin. Without fast-math (no reassociation) the compilers keep both
// additions.
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

// trunc(f) for 0 <= f < 2^22 as an int, bit for bit static_cast<int>(f); on the GPU without
// the conversion unit (F2I shares the special-function pipe with the square root): one
// addition rounded toward zero puts trunc(f) in the mantissa of 2^23 + f (exact for
// 0 <= f < 2^23, where the sum's representable neighbours are the integers), then an integer
// subtraction of 2^23's bits takes it out.
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

// Orthorhombic box: the per-axis minimum image is exact for any separation.
template <typename T>
struct OrthoBox {
    T l[3];
    T inv[3];
    FASTRDF_HD T dist2(T dx, T dy, T dz) const {
        dx -= l[0] * nint(dx * inv[0]);
        dy -= l[1] * nint(dy * inv[1]);
        dz -= l[2] * nint(dz * inv[2]);
        return norm2(dx, dy, dz);
    }
};

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
template <typename T>
struct OrthoBoxScaled {
    T l[3];
    T inv[3];  // float(1 / L), widened to T
    FASTRDF_HD T dist2(T dx, T dy, T dz) const {
        T s = dx * inv[0];
        dx = l[0] * (s - round_half_away(s));
        s = dy * inv[1];
        dy = l[1] * (s - round_half_away(s));
        s = dz * inv[2];
        dz = l[2] * (s - round_half_away(s));
        return norm2(dx, dy, dz);
    }
};

// General triclinic box given by a reduced basis a[k] (rows) and its reciprocal vectors
// f[k] (f[k] . a[l] = delta_kl). After d -> d - sum_k nint(f[k].d) a[k] the vector lies in
// the centred cell, from which every other lattice image is at least (|n_k| - 1/2) w_k away
// (w_k = 1 / |f[k]|, the cell's widths). When r_max < min(w)/2 no other image can be within
// r_max (MultiImage = false); otherwise the host lists every lattice vector that could be,
// and the minimum over them is taken.
template <typename T, bool MultiImage>
struct TriclinicBox {
    T a[3][3];
    T f[3][3];
    const T* images = nullptr;  // 3 * n_images lattice vectors (x, y, z), zero vector excluded
    int n_images = 0;

    FASTRDF_HD T dist2(T dx, T dy, T dz) const {
        const T n0 = nint(f[0][0] * dx + f[0][1] * dy + f[0][2] * dz);
        const T n1 = nint(f[1][0] * dx + f[1][1] * dy + f[1][2] * dz);
        const T n2 = nint(f[2][0] * dx + f[2][1] * dy + f[2][2] * dz);
        const T x = dx - (n0 * a[0][0] + n1 * a[1][0] + n2 * a[2][0]);
        const T y = dy - (n0 * a[0][1] + n1 * a[1][1] + n2 * a[2][1]);
        const T z = dz - (n0 * a[0][2] + n1 * a[1][2] + n2 * a[2][2]);
        T best = norm2(x, y, z);
        if (MultiImage) {
            for (int m = 0; m < n_images; ++m) {
                const T d2 = norm2(x - images[3 * m], y - images[3 * m + 1], z - images[3 * m + 2]);
                best = d2 < best ? d2 : best;
            }
        }
        return best;
    }
};

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
