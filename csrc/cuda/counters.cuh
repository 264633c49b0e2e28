// Shared-memory counters of the kernels (device code): predicated 32-bit increments, packed
// 16-bit counters, and the sum over a block's sub-histograms.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

// Sum over the copies of bin k of a window of w bins (stride: slots(window)), with the slot
// beyond the window folded into its last bin.
__device__ __forceinline__ unsigned long long copies_sum(const uint32_t* hist, int copies,
                                                         int stride, int k, int w) {
    unsigned long long s = 0;
    for (int c = 0; c < copies; ++c) s += hist[c * stride + k];
    if (k == w - 1)
        for (int c = 0; c < copies; ++c) s += hist[c * stride + w];
    return s;
}

// Adds 1 to the uint32 at shared-memory address addr when take is true: a predicated
// reduction, not a branch around an atomic (a branch costs BSSY, BRA and BSYNC per pair and
// makes the compiler reload constants after it: benchmarks/NOTES.md, GPU item 11).
__device__ __forceinline__ void shared_inc_if(uint32_t addr, bool take) {
    asm volatile(
        "{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %1, 0;\n\t@q red.shared.add.u32 [%0], 1;\n\t}"
        :
        : "r"(addr), "r"(static_cast<unsigned>(take))
        : "memory");
}

// Adds 1 to the uint32 at shared-memory address addr: no predicate, so no branch around it.
__device__ __forceinline__ void shared_inc(uint32_t addr) {
    asm volatile("red.shared.add.u32 [%0], 1;" : : "r"(addr) : "memory");
}

// Adds v to the uint32 at shared-memory address addr and returns the value it held before.
__device__ __forceinline__ uint32_t shared_fetch_add(uint32_t addr, uint32_t v) {
    uint32_t old;
    asm volatile("atom.shared.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(addr), "r"(v) : "memory");
    return old;
}

// Packed histograms: two 16-bit counters per 32-bit word of shared memory, so that a window
// twice as wide fits (100k bins in one sweep on Hopper). Bin rel of a window lives in word
// rel / 2, in its low half when rel is even and its high half when rel is odd. The one
// increment that takes a half from 0x7FFF to 0x8000 takes 0x8000 back out of the word and
// adds 0x8000 * mult to the 64-bit totals, so no half carries into its neighbour (see
// docs/design.rst, section "Packed 16-bit counters (GPU)"). Pairs that do not count increment
// a word of their lane beyond the histogram (`dummy`, never read) instead of branching around
// the atomic (benchmarks/NOTES.md, GPU items 11-12).
// packed_add: inc (1 or 0x10000) into the word at addr, the dummy word when !take.
__device__ __forceinline__ void packed_add(uint32_t addr, uint32_t inc, bool take,
                                           unsigned long long* bin_total, unsigned mult) {
    const uint32_t old = shared_fetch_add(addr, inc);
    const uint32_t half_mask = inc * 0xFFFFu;        // 0x0000FFFF or 0xFFFF0000
    const bool full = take & (((old ^ 0x7FFF7FFFu) & half_mask) == 0u);  // was 0x7FFF
    if (__any_sync(0xFFFFFFFFu, full)) {  // rare; then the whole warp, without a branch
        asm volatile("red.shared.add.u32 [%0], %1;"
                     :
                     : "r"(addr), "r"(full ? 0u - inc * kPackedFlush : 0u)
                     : "memory");
        atomicAdd(bin_total, full ? static_cast<unsigned long long>(kPackedFlush) * mult : 0ull);
    }
}

// Bin rel of the window (words from base): word rel / 2, the half rel % 2.
__device__ __forceinline__ void packed_inc(uint32_t base, uint32_t dummy, unsigned rel, bool take,
                                           unsigned long long* bin_total, unsigned mult) {
    const uint32_t inc = 1u + (rel & 1u) * 0xFFFFu;  // 1 or 0x10000
    packed_add(take ? base + 2u * (rel & ~1u) : dummy, inc, take, bin_total, mult);
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
