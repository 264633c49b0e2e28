// Bin rules of the CUDA kernels (device code): ExactRule (the CPU kernel's arithmetic) and
// FastRule (approximate root, exact bins); FloatRule, the default in single precision, is
// fastrdf/float_rule.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"

namespace fastrdf {
namespace gpu {
namespace detail {

// Bin rules: rule(r2, k) is true when the squared distance r2 is in range, and then k is its
// bin (k is some value in [0, nbins) otherwise, or garbage for NaN: never used).

// The CPU kernel's arithmetic: IEEE square root, numpy's correction near edges in double.
template <typename T>
struct ExactRule {
    Binning<T> bin;
    __device__ __forceinline__ bool operator()(T r2, int& k) const {
        constexpr bool kExact = std::is_same<T, double>::value;
        const T r = sqrt(r2);
        k = 0;
        if (!bin.in_range(r)) return false;
        const T f = bin.coordinate(r);
        k = bin.fast_bin_of(f);
        if (kExact && bin.near_edge(f, k)) k = bin.exact_bin(r);
        return true;
    }
};

// FloatRule, the default single-precision rule: fastrdf/float_rule.cuh.

// The same bins in float without the IEEE square root. The host lists, for the float bin
// function k(r2) = min(trunc((sqrt(r2) - rmin) * norm), nbins - 1) of the CPU kernel (which
// never decreases with r2), the smallest r2 of every bin (t2[k]) and the in-range limits.
// The kernel takes the hardware's approximate square root; a pair whose approximate bin
// coordinate lies farther than `delta` (a bound on the approximation's error) from an integer
// is in the same bin as with the exact root; the few others are settled by one comparison
// with t2. Same histogram as ExactRule<float>, bit for bit (see docs/design.rst, section
// "The approximate-root rule (GPU, exact_sqrt=False)").
struct FastRule {
    float lo2, hi2;    // r2 in range iff lo2 <= r2 <= hi2
    float rmin, norm;  // as in Binning<float>
    float delta;       // > |approximate - exact bin coordinate|
    int nbins;
    const float* t2;   // nbins + 1: t2[0] = 0, t2[k] = smallest r2 of bin k, t2[nbins] = inf
    __device__ __forceinline__ bool operator()(float r2, int& k) const {
        k = 0;
        if (!(r2 >= lo2 && r2 <= hi2)) return false;  // NaN (padding) is out too
        float r;
        asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(r2));
        const float f = (r - rmin) * norm;
        const float t = f + 12582912.0f;  // 1.5 * 2^23: rounds f to an integer
        const float fr = t - 12582912.0f;
        k = __float_as_int(t) - 0x4B400000;  // that integer
        const float d = f - fr;
        if (fabsf(d) < delta) {
            k = min(max(k, 0), nbins);
            k = r2 >= __ldg(t2 + k) ? k : k - 1;
        } else {
            k = d < 0.f ? k - 1 : k;
        }
        k = min(k, nbins - 1);
        return true;
    }
};

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
