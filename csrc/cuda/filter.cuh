// Double precision through the float filter on the GPU (device code): the float kernels count
// every pair in float32 (FloatRule's arithmetic, bit for bit the CPU's), flag the pairs whose
// float bin coordinate lies within the frame's bound (double_filter_delta, kernel_api.hpp) of
// an integer 0 .. nbins, queue the flagged pairs per warp in shared memory and settle them in
// float64, 32 at a time in a warp-uniform pass, with the all-double kernel's arithmetic
// (pair_dist2 of the double box, ExactRule<double>: numpy's edges). Same counts as the
// all-double kernel; why: see docs/design.rst, section "The float filter on the GPU".
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "binning.cuh"
#include "common.cuh"
#include "counters.cuh"
#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"

namespace fastrdf {
namespace gpu {
namespace detail {

// The float rule of the filter (FR: FloatRule<true> from 0, FloatRule<false> otherwise) with
// the range widened to every pair whose float coordinate f lies within [-delta, nbins + delta]
// (fr.lo2, fr.hi2, derived by the host from the float bin function), the flag of a pair near
// an integer, and the double box and rule that settle the flagged pairs.
//   raw(r2, u, g): true when r2 is in the widened range; u = kBias + trunc(f) as FloatRule's
//   raw(); g the distance measure of the flag below. split(take, g, noted, bit): the pair is
//   flagged when take and f lies within delta of an integer (then bit goes into noted: one
//   predicated OR); returns take and not flagged (the float count). A pair in range and not
//   flagged has f in (k + delta, k + 1 - delta) for some bin k < nbins: its float bin is the
//   double one.
// From 0 the coordinate is not the CPU's: f = r * norm (exact, never rounded) of the hardware's
// approximate root r = sqrt_approx(r2) (one MUFU instruction where the CPU's root takes six),
// and delta covers that root's error as measured on the device (double_filter_delta with
// FilterArithmetic{root_u, 2}). h = fl_rz(r * norm + 2^23) = 2^23 + floor(f) (one FFMA:
// the bin), c = min(h, hlim) - (2^23 - 1/2) = min(floor f, nbins - 1) + 1/2 exactly,
// g = |fl(r * norm - c)| (one FFMA: rounded once, monotone) and the flag is g >= near, near =
// the largest float <= 1/2 - delta. A pair with floor(f) >= nbins has g >= 1/2: flagged too,
// so no unflagged pair reaches the counter of bin nbins (whose pairs the flush adds to bin
// nbins - 1). Otherwise (r_min > 0) f is the CPU's float coordinate, g = |f - rint(f)|
// (exact) and the flag is g <= near = delta. Why these give the all-double kernel's counts:
// docs/design.rst, section "The float filter on the GPU".
template <class FR, class BoxD>
struct FilterRule {
    static constexpr uint32_t kBias = FR::kBias;
    static constexpr bool kZeroMin = std::is_same<FR, FloatRule<true>>::value;
    FR fr;
    float near;
    BoxD box_d;                // the frame's box in double (settle)
    ExactRule<double> exact;   // numpy's bins of the double distance (settle)
    float hlim = 0.f;          // from 0: 2^23 + nbins - 1 (exact)
    __device__ __forceinline__ bool raw(float r2, uint32_t& u, float& g) const {
        const bool in = fr.in_range(r2);
        if constexpr (kZeroMin) {
            const float r = sqrt_approx(r2);
            const float h = __fmaf_rz(r, fr.norm, 8388608.0f);
            u = __float_as_uint(h);
            g = fabsf(__fmaf_rn(r, fr.norm, -__fadd_rn(fminf(h, hlim), -8388607.5f)));
        } else {
            const float f = fr.coordinate(r2);
            u = __float_as_uint(__fadd_rz(f, 8388608.0f));
            g = fabsf(__fadd_rn(f, -rintf(f)));
        }
        return in;
    }
    // the unbiased bin clamped to nbins - 1 (windows, global kernel)
    __device__ __forceinline__ bool operator()(float r2, int& k, float& g) const {
        uint32_t u;
        const bool in = raw(r2, u, g);
        k = min(static_cast<int>(u - kBias), fr.last);
        return in;
    }
    // (one comparison gives both predicates: keep = take & !flag and its complement under
    // take, the noted pair; the OR predicated: no select, no branch. A NaN g comes with take
    // false only.)
    __device__ __forceinline__ bool split(bool take, float g, uint32_t& noted, uint32_t bit) const {
        uint32_t keep;
        if constexpr (kZeroMin)
            asm("{\n\t.reg .pred pt, pn, pk;\n\tsetp.ne.u32 pt, %2, 0;\n\t"
                "setp.lt.and.f32 pk|pn, %3, %4, pt;\n\t"
                "@pn or.b32 %0, %0, %5;\n\tselp.u32 %1, 1, 0, pk;\n\t}"
                : "+r"(noted), "=r"(keep)
                : "r"(static_cast<uint32_t>(take)), "f"(g), "f"(near), "r"(bit));
        else
            asm("{\n\t.reg .pred pt, pn, pk;\n\tsetp.ne.u32 pt, %2, 0;\n\t"
                "setp.gt.and.f32 pk|pn, %3, %4, pt;\n\t"
                "@pn or.b32 %0, %0, %5;\n\tselp.u32 %1, 1, 0, pk;\n\t}"
                : "+r"(noted), "=r"(keep)
                : "r"(static_cast<uint32_t>(take)), "f"(g), "f"(near), "r"(bit));
        return keep != 0u;
    }
};

// The filter rules of a box template B (the float box B<float>, the settle's B<double>), for
// the lists of explicit instantiations.
template <template <typename> class B>
using FilterFrom0 = FilterRule<FloatRule<true>, B<double>>;
template <template <typename> class B>
using FilterFromMin = FilterRule<FloatRule<false>, B<double>>;

template <class Rule>
constexpr bool is_filter = false;
template <class FR, class BoxD>
constexpr bool is_filter<FilterRule<FR, BoxD>> = true;
// the filter from 0 may take the dense path (common.cuh, kDenseKernel)
template <class BoxD>
constexpr bool is_zero_min<FilterRule<FloatRule<true>, BoxD>> = true;

// Per warp: kQueue entries (i, j) of flagged pairs in shared memory, and the warp-uniform
// count. Entries hold the atoms' indices in the kernel's atom array, so they outlive the j
// tile that flagged them; a warp settles 32 at once and the rest at the end of its task (and
// before a cell kernel flushes its counters).
constexpr int kQueue = 64;
constexpr int kQueueBytes = kQueue * static_cast<int>(sizeof(int2));
__host__ __device__ constexpr int queue_bytes(int threads) { return threads / 32 * kQueueBytes; }

struct FilterQueue {
    int2* q = nullptr;              // this warp's entries
    int n = 0;                      // entries held (the same value in every lane)
    const float4* atoms = nullptr;  // the kernel's atoms (x, y, z, label bits)
    unsigned settled = 0;           // pairs this warp settled
};
struct NoQueue {};

// Where the settled pairs are counted: the block's counters (see tile_pairs).
struct Counters {
    uint32_t base = 0;    // shared address of this warp's counters (bin lo of the window)
    uint32_t biased = 0;  // the same, biased for raw() bins (base - 4 kBias): dense corrections
    uint32_t dummy = 0;   // packed: this lane's dummy word
    int lo = 0, w = 0;    // the window [lo, lo + w)
    unsigned long long* out = nullptr;  // the totals of the species pair
    unsigned mult = 1;
};

template <class Rule, bool Global, bool Packed>
__device__ __forceinline__ Counters make_counters(uint32_t* mine, uint32_t dummy, int lo, int w,
                                                  unsigned long long* out, unsigned mult) {
    Counters c;
    c.base = Global ? 0u : static_cast<uint32_t>(__cvta_generic_to_shared(mine));
    c.biased = c.base - 4u * Rule::kBias;  // (modulo 2^32, as in tile_pairs)
    c.dummy = dummy;
    c.lo = lo;
    c.w = w;
    c.out = out;
    c.mult = mult;
    return c;
}

// Settles the first n (<= 32) entries of the warp's queue: lane l takes entry l, computes its
// distance and bin in double as the all-double kernel does (pair_dist2 of the double box,
// ExactRule<double>) and counts it. Dense tiles counted every pair in float already, flagged or
// not (their increment has no predicate): there the pair's float bin (the same r2 whichever
// image path its chunk took, geometry.hpp) gets -1 first. Warp-uniform: every lane calls it.
template <class Box, class Rule, bool Global, bool Windowed, bool Packed, bool Dense>
__device__ __forceinline__ void settle(FilterQueue& fq, int n, const Box& box, const Rule& rule,
                                       const Counters& c) {
    const int lane = static_cast<int>(threadIdx.x & 31u);
    __syncwarp();
    const bool have = lane < n;
    int k = 0;
    bool take = false;
    if (have) {
        const int2 e = fq.q[lane];
        const float4 ai = fq.atoms[e.x], aj = fq.atoms[e.y];
        const double r2 = pair_dist2(rule.box_d, ai.x, ai.y, ai.z, aj.x, aj.y, aj.z);
        take = rule.exact(r2, k);
        if constexpr (Dense && !Packed && !Global && !Windowed) {
            const float r2f = pair_dist2(box, ai.x, ai.y, ai.z, aj.x, aj.y, aj.z);
            uint32_t u;
            float g;
            rule.raw(r2f, u, g);
            asm volatile("red.shared.add.u32 [%0], %1;" : : "r"(c.biased + 4u * u), "r"(0xFFFFFFFFu) : "memory");
        }
    }
    const unsigned rel = static_cast<unsigned>(k - c.lo);
    if constexpr (Global) {
        if (take) atomicAdd(c.out + k, static_cast<unsigned long long>(c.mult));
    } else if constexpr (Packed) {
        const bool in_window = take & (rel < static_cast<unsigned>(c.w));
        packed_inc(c.base, c.dummy, rel, in_window, c.out + c.lo + (in_window ? rel : 0u), c.mult);
    } else {
        shared_inc_if(c.base + 4u * rel, take & (rel < static_cast<unsigned>(c.w)));
    }
    fq.settled += static_cast<unsigned>(n);
    // the entries after the first n move to the front
    const int rest = fq.n - n;
    __syncwarp();
    int2 t = make_int2(0, 0);
    if (lane < rest) t = fq.q[n + lane];
    __syncwarp();
    if (lane < rest) fq.q[lane] = t;
    __syncwarp();
    fq.n = rest;
}

// Queues the flagged pairs of one chunk (bit q of fm[r]: row r with j atom jbase + q; fm is
// cleared) and settles 32 whenever the queue holds as many. Each lane writes its pairs from the
// position a warp scan of the counts gives it; when they would not fit, rounds instead: in
// each, every lane with a flag left queues one, and 32 are settled as soon as they are there.
// Warp-uniform.
template <class Box, class Rule, bool Global, bool Windowed, bool Packed, bool Dense, int R>
__device__ __forceinline__ void enqueue(FilterQueue& fq, unsigned (&fm)[R], const int (&ii)[R],
                                        int jbase, const Box& box, const Rule& rule,
                                        const Counters& c) {
    const unsigned lane = threadIdx.x & 31u;
    int cnt = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) cnt += __popc(fm[r]);
    int x = cnt;  // inclusive scan of the counts over the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, x, o);
        if (lane >= static_cast<unsigned>(o)) x += y;
    }
    const int total = __shfl_sync(0xFFFFFFFFu, x, 31);
    if (fq.n + total <= kQueue) {
        int pos = fq.n + x - cnt;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            unsigned m = fm[r];
            while (m) {
                fq.q[pos++] = make_int2(ii[r], jbase + __ffs(m) - 1);
                m &= m - 1u;
            }
            fm[r] = 0u;
        }
        fq.n += total;
        while (fq.n >= 32) settle<Box, Rule, Global, Windowed, Packed, Dense>(fq, 32, box, rule, c);
        return;
    }
    const unsigned lt = (1u << lane) - 1u;
    for (;;) {
        int i = 0, q = 0;
        bool has = false;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const bool pick = !has & (fm[r] != 0u);
            if (pick) {
                q = __ffs(fm[r]) - 1;
                i = ii[r];
                fm[r] &= fm[r] - 1u;
            }
            has = has | pick;
        }
        const unsigned ball = __ballot_sync(0xFFFFFFFFu, has);
        if (ball == 0u) break;
        if (has) fq.q[fq.n + __popc(ball & lt)] = make_int2(i, jbase + q);
        fq.n += __popc(ball);
        if (fq.n >= 32) settle<Box, Rule, Global, Windowed, Packed, Dense>(fq, 32, box, rule, c);
    }
}

// Settles what the warp's queue still holds (end of a task, before a cell kernel's flush).
template <class Box, class Rule, bool Global, bool Windowed, bool Packed, bool Dense>
__device__ __forceinline__ void drain(FilterQueue& fq, const Box& box, const Rule& rule,
                                      const Counters& c) {
    if (fq.n > 0) settle<Box, Rule, Global, Windowed, Packed, Dense>(fq, fq.n, box, rule, c);
}

// Adds a warp's settled pairs to the launch's statistics (stats[3]).
__device__ __forceinline__ void add_settled(unsigned long long* stats, const FilterQueue& fq) {
    if (stats && (threadIdx.x & 31) == 0 && fq.settled)
        atomicAdd(stats + 3, static_cast<unsigned long long>(fq.settled));
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
