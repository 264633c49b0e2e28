// The single-precision bin rule of the CUDA all-pairs and cell-list kernels (device code).
// Its own header so that benchmarks/gpu_micro/pair_micro.cu measures this very rule.
#pragma once

#include <cstdint>

#include "fastrdf/geometry.hpp"

namespace fastrdf {
namespace gpu {

// The hardware's approximate square root (one MUFU instruction on current GPUs; subnormal
// inputs flushed to 0). Its relative error is not specified tightly enough to build on, so
// the float filter of double precision (filter.cuh) takes the error this device shows over
// every positive normal float (sqrt_approx_error, device.cu) measured with this very function.
__device__ __forceinline__ float sqrt_approx(float x) {
    float r;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// The CPU kernel's float bins, branch-free: the range test on r2 against limits lo2, hi2 the
// host derived from the float bin function, and the IEEE square root written out as the
// compiler's own sequence for normal inputs (r2 raised to at least 2^-100 first), without its
// branch for special inputs. The caller increments bin k only when the predicate is true
// (benchmarks/NOTES.md, GPU item 10). ZeroMin (the range starts at 0): no subtraction of rmin
// and no lower range test (GPU item 15). raw() gives the biased, unclamped bin
// u = kBias + trunc(f) in [kBias, kBias + nbins], for callers with a counter for bin nbins
// (r == rmax) that the flush adds to bin nbins - 1. Why these give the CPU's bins bit for
// bit: see docs/design.rst, section "The branch-free single-precision rule (GPU)".
template <bool ZeroMin = false>
struct FloatRule {
    static constexpr uint32_t kBias = 0x4B000000u;  // bits of 2^23: u - kBias = trunc(f)
    float lo2, hi2;  // r2 in range iff lo2 <= r2 <= hi2
    float rmin, norm;
    int last;        // nbins - 1
    // r2 in range (NaN: out)
    __device__ __forceinline__ bool in_range(float r2) const {
        return ZeroMin ? (r2 <= hi2) : ((r2 >= lo2) & (r2 <= hi2));
    }
    // the CPU kernel's float bin coordinate (r - rmin) * norm of r = sqrtf(r2)
    __device__ __forceinline__ float coordinate(float r2) const {
        const float x = fmaxf(r2, 0x1p-100f);
        float y;
        asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
        float r = __fmul_rn(x, y);
        const float h = __fmul_rn(y, 0.5f);
        const float e = __fmaf_rn(-r, r, x);
        r = __fmaf_rn(e, h, r);
        return ZeroMin ? __fmul_rn(r, norm) : __fmul_rn(__fadd_rn(r, -rmin), norm);
    }
    __device__ __forceinline__ bool raw(float r2, uint32_t& u) const {
        const bool in = in_range(r2);
        const float f = coordinate(r2);
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
