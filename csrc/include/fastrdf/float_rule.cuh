// The single-precision bin rule of the CUDA all-pairs and cell-list kernels (device code).
// Its own header so that benchmarks/gpu_micro/pair_micro.cu measures this very rule.
#pragma once

#include <cstdint>

#include "fastrdf/geometry.hpp"

namespace fastrdf {
namespace gpu {

// The CPU kernel's float bins, branch-free. The range test is taken on r2 against limits the
// host derived from the float bin function (r2 in range iff sqrtf(r2) is), and the IEEE square
// root is written out as the compiler's own sequence for normal inputs (one MUFU.RSQ, two
// multiplications, two FMAs: correctly rounded for r2 >= 2^-101), without its branch to the
// slow path for tiny, huge and special inputs and without the rescaling of subnormal inputs
// (ftz): r2 is raised to at least 2^-100 first, which cannot change a bin (an r2 below 2^-100
// in range lies in bin 0 either way, as norm < 2^40 is checked on the host), and huge r2 are
// out of range. The caller increments bin k only when the predicate is true, so no -1
// sentinel and no second comparison are needed (benchmarks/NOTES.md, GPU item 10).
//
// ZeroMin (the range starts at 0, as InterRDF's default does): r - 0 is r and every r2 >= 0 is
// at least lo2 = 0, so the subtraction and the lower range test go (NaN padding still fails
// r2 <= hi2): two instructions less per pair, the same bins (GPU item 15).
//
// raw() leaves out the clamp of r == rmax (bin nbins) into the last bin and the integer
// subtraction of the truncation: it gives u = kBias + trunc(f) with trunc(f) in [0, nbins]
// (the host checks f < nbins + 1 at hi2, and f never decreases with r2), so that a caller
// with a shared slot for bin nbins, added to bin nbins - 1 at the flush, addresses its
// counter as (base - 4 kBias) + 4 u: one LEA per pair where bin() needs two instructions.
template <bool ZeroMin = false>
struct FloatRule {
    static constexpr uint32_t kBias = 0x4B000000u;  // bits of 2^23: u - kBias = trunc(f)
    float lo2, hi2;  // r2 in range iff lo2 <= r2 <= hi2
    float rmin, norm;
    int last;        // nbins - 1
    __device__ __forceinline__ bool raw(float r2, uint32_t& u) const {
        const bool in = ZeroMin ? (r2 <= hi2) : ((r2 >= lo2) & (r2 <= hi2));
        const float x = fmaxf(r2, 0x1p-100f);
        float y;
        asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
        float r = __fmul_rn(x, y);
        const float h = __fmul_rn(y, 0.5f);
        const float e = __fmaf_rn(-r, r, x);
        r = __fmaf_rn(e, h, r);
        const float f = ZeroMin ? __fmul_rn(r, norm) : __fmul_rn(__fadd_rn(r, -rmin), norm);
        u = __float_as_uint(__fadd_rz(f, 8388608.0f));  // trunc_nonneg of geometry.hpp, biased
        return in;
    }
    __device__ __forceinline__ bool operator()(float r2, int& k) const {
        uint32_t u;
        const bool in = raw(r2, u);
        k = min(static_cast<int>(u - kBias), last);
        return in;
    }
};

}  // namespace gpu
}  // namespace fastrdf
