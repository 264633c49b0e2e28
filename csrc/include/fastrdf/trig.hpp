// Sine and cosine without branches, for loops that the compiler vectorises (a library sin or
// cos branches on the argument's range: on arguments of random size those branches
// mispredict, ~20 ns a value on the development machine against ~5 here).
//
// The kernels are fdlibm's minimax polynomials on |r| <= pi/4 (Sun Microsystems, 1993; also
// in K. C. Ng, "Argument reduction for huge arguments: good to the last bit", 1992): within
// about one unit in the last place of the correctly rounded value. The callers reduce the
// argument: by multiples of pi/2 (displacements.cpp: sin y / y of lengths) or by quarter turns,
// exactly (sincos_turns below: the phases of the k-space sums).
//
// Plain IEEE double operations only (the build turns FMA contraction off), so every SIMD
// width gives the same bits.
#pragma once

#include <cmath>

namespace fastrdf {
namespace trig {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// sin r, |r| <= pi/4
inline double sin_kernel(double r) {
    constexpr double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                     S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                     S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
    const double z = r * r;
    return r + (z * r) * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))));
}

// cos r, |r| <= pi/4
inline double cos_kernel(double r) {
    constexpr double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                     C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                     C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
    const double z = r * r;
    const double cr = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
    const double hz = 0.5 * z, w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + z * cr);
}

// sin and cos of 2 pi t (t in turns, |t| < 2^50). t is reduced by the nearest quarter turn
// k / 4 exactly: t and k / 4 are both multiples of ulp(t), and |t - k / 4| <= 1/8 <= |t|
// (or t itself when k = 0), so the difference is representable. The only rounding before the
// kernels is that of 2 pi f (and of 2 pi itself): a relative error of at most 2 units of
// 2^-53 in an argument of at most pi / 4.
inline void sincos_turns(double t, double& s, double& c) {
    const double k = std::nearbyint(4.0 * t);
    const double f = t - 0.25 * k;
    const double r = kTwoPi * f;
    const double sr = sin_kernel(r), cr = cos_kernel(r);
    // the quarter k modulo 4, in doubles (exact; a conversion to 64-bit integers would not
    // vectorise without AVX-512): sin(r + q pi/2), cos(r + q pi/2) are
    // q = 0 (s, c), 1 (c, -s), 2 (-s, -c), 3 (-c, s)
    const double q = k - 4.0 * std::floor(0.25 * k);
    const bool odd = (q == 1.0) | (q == 3.0);
    const double s0 = odd ? cr : sr;
    const double c0 = odd ? sr : cr;
    s = q >= 2.0 ? -s0 : s0;
    c = ((q == 1.0) | (q == 2.0)) ? -c0 : c0;
}

}  // namespace trig
}  // namespace fastrdf
