// The pair loop of one tile (device code), shared by the all-pairs and the cell-list kernels:
// a tile of j atoms loaded into shared memory with the bounds of its chunks, every pair of a
// thread's i atoms with it, and the chunk statistics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"
#include "counters.cuh"
#include "fastrdf/geometry.hpp"
#include "filter.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

// Loads atom j of a tile (when valid) into jt[threadIdx.x] and, for periodic boxes, the
// bounds of each chunk of kChunk atoms into jbox[2 c] (lowest x, y, z) and jbox[2 c + 1]
// (highest): one warp per chunk, so the tile's size is a multiple of kChunk. A chunk with no
// valid atom gets empty bounds, but no caller reaches it.
template <class Box>
__device__ __forceinline__ void load_tile(float4* jt, float4* jbox, const float4* atoms, int j,
                                          bool valid) {
    const float inf = __int_as_float(0x7f800000);
    float4 v = make_float4(inf, inf, inf, 0.f);
    if (valid) v = atoms[j];
    // past the tile's end: NaN, never in range and never flagged (the filter's chunk loop
    // reads whole chunks)
    const float nan = __int_as_float(0x7fc00000);
    jt[threadIdx.x] = valid ? v : make_float4(nan, nan, nan, 0.f);
    if constexpr (kPeriodic<Box>) {
        float lx = v.x, ly = v.y, lz = v.z;
        float hx = valid ? v.x : -inf, hy = valid ? v.y : -inf, hz = valid ? v.z : -inf;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            lx = fminf(lx, __shfl_xor_sync(0xFFFFFFFFu, lx, o));
            ly = fminf(ly, __shfl_xor_sync(0xFFFFFFFFu, ly, o));
            lz = fminf(lz, __shfl_xor_sync(0xFFFFFFFFu, lz, o));
            hx = fmaxf(hx, __shfl_xor_sync(0xFFFFFFFFu, hx, o));
            hy = fmaxf(hy, __shfl_xor_sync(0xFFFFFFFFu, hy, o));
            hz = fmaxf(hz, __shfl_xor_sync(0xFFFFFFFFu, hz, o));
        }
        if ((threadIdx.x & 31) == 0) {
            const int c = static_cast<int>(threadIdx.x) / kChunk;
            jbox[2 * c] = make_float4(lx, ly, lz, 0.f);
            jbox[2 * c + 1] = make_float4(hx, hy, hz, 0.f);
        }
    }
}

// A block's dynamic shared memory, as both kernels lay it out: declares jt (the tile of
// `threads` j atoms), jbox (the bounds of its chunks; tile_bytes in all) and hist (the counters,
// then the filter's queues). A macro, not a function: a helper returning the pointers changed
// the kernels' register allocation (same instructions, other registers).
#define FASTRDF_BLOCK_SHARED(threads)                     \
    extern __shared__ __align__(16) unsigned char smem[]; \
    float4* jt = reinterpret_cast<float4*>(smem);         \
    float4* jbox = jt + threads;                          \
    uint32_t* hist = reinterpret_cast<uint32_t*>(smem + tile_bytes(threads))

// All pairs of this thread's i atoms with the j atoms in shared memory. Tri: same-species
// task on the diagonal, only j > i counts. Padding i atoms are NaN: never in range. Every
// pair is computed; exclusions (Tri, Labels) and the range only mask the increment.
//
// Periodic boxes go chunk by chunk (kChunk j atoms, bounds in jbox): each thread asks whether
// every displacement from its i atoms to the chunk's bounding box gets one image
// (common_image, geometry.hpp); when every lane of the warp can (padding rows count as able:
// their NaN pairs never count), the chunk's pairs take that shift and only reduce() per pair
// (norm() alone when every row's shift is 0), else each pair its own image. With spatially
// sorted atoms (run()) most chunks can. Single-precision shared-memory kernels have a third
// way for chunks where the rows disagree on one index only (below: one index of a triclinic
// box, one axis of an orthorhombic one). Every way gives the r2 of dist2 bit for bit (see
// docs/design.rst, section "One image for a box of displacements"). chunks[0] counts the
// chunks that took one image, chunks[1] those that took one index, chunks[2] all chunks (per
// warp).
//
// Double precision through the float filter (Rule a FilterRule, filter.cuh; Q = FilterQueue):
// every pair is binned in float as above except the flagged ones (float coordinate within the
// frame's bound of an integer), which each lane notes in a mask per row and chunk of kChunk j
// atoms; after each chunk a warp with flags queues them and settles them in double, 32 at a
// time. Dense tiles count the flagged pairs in float too (no predicate on their increment) and
// their settle takes that count back.
template <typename T, class Box, class Rule, bool Labels, bool Global, bool Windowed, bool Tri,
          bool Packed = false, int R = kRows, bool Dense = false, class Q = NoQueue>
__device__ __forceinline__ void tile_pairs(const float4 (&ai)[R], const int (&ii)[R],
                                           const float4* jt, const float4* jbox, int jb, int nj,
                                           const Box& box, const Rule& rule,
                                           unsigned long long* out, unsigned mult, uint32_t* mine,
                                           int lo, int w, uint32_t dummy, bool chunk_images,
                                           unsigned (&chunks)[3], Q& fq) {
    constexpr bool kFilter = is_filter<Rule>;
    static_assert(kFilter == std::is_same<Q, FilterQueue>::value, "a filter rule needs its queue");
    uint32_t base = Global ? 0u : static_cast<uint32_t>(__cvta_generic_to_shared(mine));
    // the filter's settle counts into the counters at their plain addresses
    Counters counters;
    if constexpr (kFilter) counters = make_counters<Rule, Global, Packed>(mine, dummy, lo, w, out, mult);
    // kFilter: the flagged pairs of a chunk, 4 j atoms per step (kSteps steps): bit g of
    // fm[r][t] is row r with j atom c0 + g + kSteps t, so that a step takes one bit register
    // for its 4 j atoms and end_chunk lays the row's 32 flags out in j order with three shifts
    constexpr int kPerStep = 4, kSteps = kChunk / kPerStep;
    unsigned fm[R][kPerStep];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < kPerStep; ++t) fm[r][t] = 0u;
    // raw(): one LEA from the biased bin to the counter's address (float_rule.cuh)
    // (packed: word u / 2 from base - 2 kBias, half u % 2, as kBias is even and lo = 0)
    constexpr bool kRaw = !Global && !Windowed && has_raw<Rule>::value;
    if constexpr (kRaw) base -= (Packed ? 2u : 4u) * Rule::kBias;  // modulo 2^32, as the sum is
    if (Packed) {
        // opaque to the compiler: kept in registers rather than recomputed after each
        // warp-uniform branch of packed_inc (S2R, MOV, LEA per pair otherwise)
        asm volatile("" : "+r"(base));
        asm volatile("" : "+r"(dummy));
    }
    // bins the pair (i = row r, j = jb + k) at squared distance r2 (kFilter: a flag goes to
    // bit `bit` of `noted_in`)
    auto count = [&](T r2, int k, unsigned bit, unsigned& noted_in, int r, const float4& aj) {
        int b = 0;
        uint32_t u = 0;
        bool take;
        float g = 0.f;  // kFilter: the flag's measure (FilterRule)
        if constexpr (kFilter) {
            if constexpr (kRaw) take = rule.raw(r2, u, g);
            else take = rule(r2, b, g);
        } else if constexpr (kRaw) {
            take = rule.raw(r2, u);
        } else {
            take = rule(r2, b);
        }
        if (Tri) take = take & (jb + k > ii[r]);
        if (Labels) take = take & (__float_as_int(aj.w) != __float_as_int(ai[r].w));
        // kFilter: a flagged pair is noted and left out of the float count (dense tiles:
        // every pair is in range; the 32-bit dense increment counts it anyway, see above)
        if constexpr (kFilter) take = rule.split(Dense || take, g, noted_in, bit);
        if (Global) {
            if (take) atomicAdd(out + b, static_cast<unsigned long long>(mult));
        } else if constexpr (Packed && kRaw) {
            static_assert(!Dense || (!Tri && !Labels), "dense: nothing masked");
            // (filter: the flagged pairs of dense tiles go to the lane's dummy word)
            const bool t = (Dense && !kFilter) || take;
            const uint32_t inc = 1u + (u & 1u) * 0xFFFFu;  // 1 or 0x10000
            // the totals of bin nbins (r == rmax) are those of bin nbins - 1; lanes that
            // do not count (r < rmin: u below the bias) point at bin 0, as they add 0
            const int bin = min(max(static_cast<int>(u - Rule::kBias), 0), w - 1);
            packed_add(t ? base + 2u * (u & ~1u) : dummy, inc, t, out + bin, mult);
        } else if (Packed) {
            const unsigned rel = static_cast<unsigned>(b - lo);
            const bool in_window = Windowed ? (take & (rel < static_cast<unsigned>(w))) : take;
            // lanes that do not count add 0 to the totals of the window's first bin
            packed_inc(base, dummy, rel, in_window, out + lo + (in_window ? rel : 0u), mult);
        } else if (Windowed) {
            const unsigned rel = static_cast<unsigned>(b - lo);
            shared_inc_if(base + 4u * rel, take & (rel < static_cast<unsigned>(w)));
        } else if constexpr (Dense) {
            static_assert(kRaw && !Tri && !Labels, "dense: raw bins, nothing masked");
            shared_inc(base + 4u * u);
        } else if constexpr (kRaw) {
            shared_inc_if(base + 4u * u, take);
        } else {
            shared_inc_if(base + 4u * static_cast<unsigned>(b), take);
        }
    };
    // every pair of j atoms [c0, c1) with the rows, r2 from r2_of(j atom, row)
    auto pairs_of = [&](int c0, int c1, auto r2_of) {
        if constexpr (kFilter) {
            // one chunk (c1 - c0 <= kChunk), in steps of 4 j atoms (above), one step per
            // iteration: unrolled, each step would be 4 R more pair bodies in every chunk path
            // of every launch shape, which is what the build paid for (benchmarks/NOTES.md,
            // "Build time"). A partial chunk (the tile's end) runs whole: its atoms past c1 are
            // NaN (load_tile), so their pairs are neither counted nor flagged; except in dense
            // tiles, which count every pair they see: there each j atom is tested.
            unsigned bit = 1u;
            if (!Dense || c1 - c0 == kChunk) {
#pragma unroll 1
                for (int g = 0; g < kSteps; ++g, bit <<= 1) {
#pragma unroll
                    for (int t = 0; t < kPerStep; ++t) {
                        const int k = c0 + g + kSteps * t;
                        const float4 aj = jt[k];
#pragma unroll
                        for (int r = 0; r < R; ++r) count(r2_of(aj, r), k, bit, fm[r][t], r, aj);
                    }
                }
            } else if constexpr (Dense) {
#pragma unroll 1
                for (int g = 0; g < kSteps; ++g, bit <<= 1) {
#pragma unroll
                    for (int t = 0; t < kPerStep; ++t) {
                        const int k = c0 + g + kSteps * t;
                        if (k < c1) {
                            const float4 aj = jt[k];
#pragma unroll
                            for (int r = 0; r < R; ++r) count(r2_of(aj, r), k, bit, fm[r][t], r, aj);
                        }
                    }
                }
            }
        } else {
            unsigned none = 0u;
            for (int k = c0; k < c1; ++k) {
                const float4 aj = jt[k];
#pragma unroll
                for (int r = 0; r < R; ++r) count(r2_of(aj, r), k, 0u, none, r, aj);
            }
        }
    };
    // the end of the chunk at c0 (kFilter: queue and settle its flagged pairs; warp-uniform)
    auto end_chunk = [&](int c0) {
        if constexpr (kFilter) {
            unsigned rows[R], any = 0u;  // bit q: row r with j atom c0 + q
#pragma unroll
            for (int r = 0; r < R; ++r) {
                rows[r] = fm[r][0] | (fm[r][1] << kSteps) | (fm[r][2] << (2 * kSteps)) |
                          (fm[r][3] << (3 * kSteps));
                any |= rows[r];
#pragma unroll
                for (int t = 0; t < kPerStep; ++t) fm[r][t] = 0u;
            }
            static_assert(kPerStep == 4 && kSteps * kPerStep == 32, "32 flags per row and chunk");
            if (__any_sync(0xFFFFFFFFu, any != 0u))
                enqueue<Box, Rule, Global, Windowed, Packed, Dense, R>(fq, rows, ii, jb + c0, box, rule, counters);
        }
    };
    auto own_image = [&](const float4& aj, int r) {
        return pair_dist2(box, ai[r].x, ai[r].y, ai[r].z, aj.x, aj.y, aj.z);
    };
    if constexpr (!kPeriodic<Box> && kFilter) {
        for (int c0 = 0; c0 < nj; c0 += kChunk) {
            pairs_of(c0, min(c0 + kChunk, nj), own_image);
            end_chunk(c0);
        }
    } else if constexpr (!kPeriodic<Box>) {
        pairs_of(0, nj, own_image);
    } else {
        // (the special loops in single-precision shared-memory kernels only: each variant
        // costs compile time)
        constexpr bool kFloatShared = std::is_same<T, float>::value && !Global && !Windowed;
        constexpr bool kOneIndex = kFloatShared && is_triclinic<Box>;
        constexpr bool kAxes = kFloatShared && std::is_same<Box, OrthoBox<float>>::value;
        // (a zero shift saves nothing in the MDAnalysis-scaled form, which has no norm())
        constexpr bool kZero = kFloatShared && has_norm<Box>::value;
        for (int c0 = 0; c0 < nj; c0 += kChunk) {
            const int c1 = min(c0 + kChunk, nj);
            const float4 bl = jbox[2 * (c0 / kChunk)], bh = jbox[2 * (c0 / kChunk) + 1];
            T s[R][3];
            T nl[R][3];           // kOneIndex: each row's lowest indices over the chunk
            unsigned unsure = 0;  // kOneIndex: bit k when a row's index k takes two values
            unsigned axes = 7u;   // kAxes: bit c when every row takes one index along axis c
            bool one = chunk_images, wide = false;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const T dl[3] = {static_cast<T>(bl.x - ai[r].x), static_cast<T>(bl.y - ai[r].y),
                                 static_cast<T>(bl.z - ai[r].z)};
                const T dh[3] = {static_cast<T>(bh.x - ai[r].x), static_cast<T>(bh.y - ai[r].y),
                                 static_cast<T>(bh.z - ai[r].z)};
                const bool pad = ai[r].x != ai[r].x;
                if constexpr (kOneIndex) {
                    T nh[3];
                    box.index_bounds(dl, dh, nl[r], nh);
                    box.shift(nl[r], s[r]);
#pragma unroll
                    for (int k = 0; k < 3; ++k) {
                        const bool u = !(nl[r][k] == nh[k]) & !pad;
                        unsure |= static_cast<unsigned>(u) << k;
                        wide = wide | (u & !(nh[k] - nl[r][k] <= T(1)));
                    }
                } else if constexpr (kAxes) {
                    axes &= pad ? 7u : box.common_axes(dl, dh, s[r]);
                } else {
                    one = one & (box.common_image(dl, dh, s[r]) | pad);
                }
            }
            if constexpr (kOneIndex) one = one & (unsure == 0u);
            if constexpr (kAxes) one = one & (axes == 7u);
            ++chunks[2];
            // the pair of j atom aj and row r
            auto d_of = [&](const float4& aj, int r, T (&d)[3]) {
                d[0] = static_cast<T>(aj.x - ai[r].x);
                d[1] = static_cast<T>(aj.y - ai[r].y);
                d[2] = static_cast<T>(aj.z - ai[r].z);
            };
            // every path of the chunk, then its end (one end_chunk: the filter's queueing is
            // compiled once per tile loop, not once per path)
            [&] {
                if (__all_sync(0xFFFFFFFFu, one)) {
                    ++chunks[0];
                    if constexpr (kZero) {
                        bool zero = true;
#pragma unroll
                        for (int r = 0; r < R; ++r)  // (padding rows: any shift, their pairs never count)
                            zero = zero & ((ai[r].x != ai[r].x) |
                                           ((s[r][0] == T(0)) & (s[r][1] == T(0)) & (s[r][2] == T(0))));
                        if (__all_sync(0xFFFFFFFFu, zero)) {
                            // the shift 0 for every row: d - 0 is d, so norm(d), the loop of a
                            // frame without a box (plus the triclinic extra images)
                            pairs_of(c0, c1, [&](const float4& aj, int r) {
                                T d[3];
                                d_of(aj, r, d);
                                return box.norm(d[0], d[1], d[2]);
                            });
                            return;
                        }
                    }
                    pairs_of(c0, c1, [&](const float4& aj, int r) {
                        T d[3];
                        d_of(aj, r, d);
                        return box.reduce(d[0], d[1], d[2], s[r]);
                    });
                    return;
                }
                if constexpr (kAxes) {
                    // Orthorhombic chunks whose rows disagree along one axis only: that axis takes
                    // each pair's own image (OrthoBox::axis_reduced, dist2's arithmetic), the
                    // other two the row's shift.
                    unsigned warp_axes = 0;
#pragma unroll
                    for (int c = 0; c < 3; ++c)
                        warp_axes |= static_cast<unsigned>(__all_sync(0xFFFFFFFFu, (axes >> c) & 1u)) << c;
                    if (chunk_images && __popc(warp_axes) == 2) {
                        ++chunks[1];
                        auto along = [&](auto axis) {
                            constexpr int c = decltype(axis)::value;
                            pairs_of(c0, c1, [&](const float4& aj, int r) {
                                T d[3];
                                d_of(aj, r, d);
#pragma unroll
                                for (int q = 0; q < 3; ++q)
                                    d[q] = q == c ? box.axis_reduced(q, d[q]) : d[q] - s[r][q];
                                return box.norm(d[0], d[1], d[2]);
                            });
                        };
                        if (!(warp_axes & 1u))
                            along(std::integral_constant<int, 0>{});
                        else if (!(warp_axes & 2u))
                            along(std::integral_constant<int, 1>{});
                        else
                            along(std::integral_constant<int, 2>{});
                        return;
                    }
                }
                if constexpr (kOneIndex) {
                    // The rows disagree on one index k only (the same for the whole warp), and each
                    // row's index k is one of two neighbours nl, nl + 1: a pair needs only index k
                    // (Box::index_with, the same rounding as index()) to pick between the row's two
                    // shifts, both made by shift() as dist2 would make them.
                    unsigned warp_unsure = 0;
#pragma unroll
                    for (int k = 0; k < 3; ++k)
                        warp_unsure |= static_cast<unsigned>(__any_sync(0xFFFFFFFFu, (unsure >> k) & 1u)) << k;
                    if (chunk_images && __popc(warp_unsure) == 1 && !__any_sync(0xFFFFFFFFu, wide)) {
                        ++chunks[1];
                        const int k = __ffs(warp_unsure) - 1;
                        T c[3], nk[R], sh[R][3];
#pragma unroll
                        for (int q = 0; q < 3; ++q) c[q] = k == 0 ? box.f[0][q] : (k == 1 ? box.f[1][q] : box.f[2][q]);
#pragma unroll
                        for (int r = 0; r < R; ++r) {
                            nk[r] = k == 0 ? nl[r][0] : (k == 1 ? nl[r][1] : nl[r][2]);
                            T up[3];
#pragma unroll
                            for (int q = 0; q < 3; ++q) up[q] = q == k ? nl[r][q] + T(1) : nl[r][q];
                            box.shift(up, sh[r]);
                        }
                        pairs_of(c0, c1, [&](const float4& aj, int r) {
                            T d[3];
                            d_of(aj, r, d);
                            const bool hi = Box::index_with(c, d[0], d[1], d[2]) != nk[r];
                            const T t[3] = {hi ? sh[r][0] : s[r][0], hi ? sh[r][1] : s[r][1],
                                            hi ? sh[r][2] : s[r][2]};
                            return box.reduce(d[0], d[1], d[2], t);
                        });
                        return;
                    }
                }
                pairs_of(c0, c1, own_image);
            }();
            end_chunk(c0);
        }
    }
}

// Adds a warp's chunk counts (tile_pairs) to the launch's statistics.
__device__ __forceinline__ void add_chunk_stats(unsigned long long* stats, const unsigned (&chunks)[3]) {
    if (stats && (threadIdx.x & 31) == 0 && chunks[2]) {
        atomicAdd(stats, static_cast<unsigned long long>(chunks[0]));
        atomicAdd(stats + 1, static_cast<unsigned long long>(chunks[1]));
        atomicAdd(stats + 2, static_cast<unsigned long long>(chunks[2]));
    }
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
