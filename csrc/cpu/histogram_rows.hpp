// One row's SIMD loop: the bin index (or dummy slot, or the filter's flag) of every pair
// of atom i with a run of j atoms.
// A part of histogram.cpp (histogram_part.hpp).
#pragma once
#include "histogram_part.hpp"

// Whether one of the 16 indices at p holds kNearFlag (bit 31): one vector test of the block
// the lane loop has just stored (a plain loop of ORs compiled to 16 scalar loads, which stall on
// forwarding from the vector stores; benchmarks/NOTES.md, "the float filter's overhead").
inline bool any_flag16(const uint32_t* p) {
    static_assert(kNearFlag == 0x80000000u, "the flag is the sign bit");
#if defined(__AVX512F__)
    const __m512i v = _mm512_loadu_si512(p);
    return _mm512_test_epi32_mask(v, _mm512_set1_epi32(static_cast<int>(kNearFlag))) != 0;
#elif defined(__AVX2__)
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(a, b))) != 0;
#elif defined(__SSE2__)
    const __m128i* q = reinterpret_cast<const __m128i*>(p);
    const __m128i v = _mm_or_si128(_mm_or_si128(_mm_loadu_si128(q), _mm_loadu_si128(q + 1)),
                                   _mm_or_si128(_mm_loadu_si128(q + 2), _mm_loadu_si128(q + 3)));
    return _mm_movemask_ps(_mm_castsi128_ps(v)) != 0;
#else
    uint32_t any = 0;
    for (int k = 0; k < kDummySlots; ++k) any |= p[k];
    return (any & kNearFlag) != 0;
#endif
}

// SIMD part: bin index (or dummy slot, or near-edge flag) of pairs (i, j0..j0+n). blocks:
// null, or the image of each block of 16 lanes (certify_blocks).
// Filter (float, double precision through the float filter: double_filter_delta): a pair whose
// bin coordinate lies within `filter` of an integer 0 .. nbins is flagged (kNearFlag) for the
// caller to recompute in double; the first lanes of the blocks of 16 with a flag go to
// near_blocks, and their number is returned (0 without Filter).
template <typename T, class Box, bool Labels, bool Exact, bool Filter>
inline int row_indices(const float* __restrict xs, const float* __restrict ys,
                       const float* __restrict zs, const int32_t* __restrict ls, int n, float xi,
                       float yi, float zi, int32_t li, const Box& box_in, const Binning<T>& bin_in,
                       T filter, const BlockImage<T>* blocks, uint32_t* __restrict idx,
                       int* __restrict near_blocks) {
    static_assert(!(Filter && Exact), "the filter replaces the exact path");
    // Local copies: the compiler can keep every parameter in a register and vectorise.
    const Box box = box_in;
    const Binning<T> bin = bin_in;
    const int nb = bin.nbins;
    const T top = static_cast<T>(nb) + T(0.5);
    int n_near = 0;
    // Whole blocks of 16 lanes, also for the last, partial one: the arrays hold kRowPad
    // readable elements past every row (kernel_api.hpp), and the caller sends the lanes past
    // n to a dummy slot. Short rows (cell lists) thus never fall into a scalar remainder
    // loop, whose range test branches unpredictably.
    for (int k0 = 0; k0 < n; k0 += kDummySlots) {
        // the 16 lanes of the block, r2 from r2_of(lane, d)
        auto lanes = [&](auto r2_of) {
#pragma omp simd
            for (int kk = 0; kk < kDummySlots; ++kk) {
                const int k = k0 + kk;
                const T dx = static_cast<T>(xs[k] - xi);
                const T dy = static_cast<T>(ys[k] - yi);
                const T dz = static_cast<T>(zs[k] - zi);
                const T r = std::sqrt(r2_of(kk, dx, dy, dz));
#if defined(FASTRDF_CHECK_CERTIFIED)
                // test builds (tests/sanitize_cpu.sh): a certified block must give every pair
                // of the row dist2's r2, bit for bit
                if (k < n && !(r2_of(kk, dx, dy, dz) == box.dist2(dx, dy, dz))) __builtin_trap();
#endif
                bool in = bin.in_range(r);
                bool label_ok = true;
                if (Labels) label_ok = ls[k] != li;
                in = in & label_ok;
                if constexpr (Filter) {
                    // f of every pair, clamped to [-1/2, nbins + 1/2] (where nint is exact),
                    // and its distance to the nearest integer (exact, by Sterbenz). A pair not
                    // flagged has f within (filter, nbins - filter) exactly when float's range
                    // test passes, and then the ideal coordinate has the same integer part,
                    // int(f) < nbins: no clamp of the bin (fast_bin_of's) is needed. Written as
                    // max, min and two selects, so the lane costs about what single's does.
                    // Lanes past n may be flagged; the caller resets them.
                    const T f0 = bin.coordinate(r);
                    const T f1 = f0 > T(-0.5) ? f0 : T(-0.5);
                    const T f = f1 < top ? f1 : top;
                    T g = std::fabs(f - nint(f));
                    // the slab's band: an image near the slab's edge gives r2 = -1, r = NaN,
                    // flagged as g = 0 (filter > 0)
                    if constexpr (is_slab_box<Box>) g = r == r ? g : T(0);
                    const bool nr = (g < filter) & label_ok;
                    const uint32_t b = static_cast<uint32_t>(static_cast<int>(f));  // f >= -1/2
                    const uint32_t u = in ? b : static_cast<uint32_t>(nb + kk);
                    idx[k] = nr ? kNearFlag : u;
                } else {
                    const T f = in ? bin.coordinate(r) : T(0);
                    const int b = bin.fast_bin_of(f);
                    uint32_t u = static_cast<uint32_t>(b);
                    if (Exact) u |= static_cast<uint32_t>(bin.near_edge(f, b) ? 1u : 0u) << 31;
                    idx[k] = in ? u : static_cast<uint32_t>(nb + kk);
                }
            }
        };
        const int kind = blocks ? blocks[k0 / kDummySlots].kind : kOwn;
        if constexpr (has_extra_images<Box>) {
            // the least r2 over the extra images across the block's 16 lanes (cpu.hpp), with
            // the block's shift (kShift, kZero: 0) or each lane's own
            alignas(64) T cx[kDummySlots], cy[kDummySlots], cz[kDummySlots], best[kDummySlots];
            extra_image_r2(box, xs + k0, ys + k0, zs + k0, xi, yi, zi, kDummySlots,
                           kind == kOwn ? nullptr : blocks[k0 / kDummySlots].s, cx, cy, cz, best);
            lanes([&](int kk, T, T, T) { return best[kk]; });
        } else if (has_norm<Box>::value && kind == kZero) {
            if constexpr (has_norm<Box>::value)
                lanes([&](int, T dx, T dy, T dz) { return box.norm(dx, dy, dz); });
        } else if (!std::is_same<Box, NoBox<T>>::value && kind == kShift) {
            if constexpr (!std::is_same<Box, NoBox<T>>::value) {
                const BlockImage<T> bi = blocks[k0 / kDummySlots];
                lanes([&](int, T dx, T dy, T dz) { return box.reduce(dx, dy, dz, bi.s); });
            }
        } else {
            lanes([&](int, T dx, T dy, T dz) { return box.dist2(dx, dy, dz); });
        }
    }
    if constexpr (Filter) {
        // The blocks with a flag, in a pass after the row rather than after each block: there
        // the test's load waits for the block's just-stored indices (store forwarding at the end
        // of the root's dependency chain) and held the retirement of every block (the filter's
        // loop 11 % slower; benchmarks/NOTES.md, "the float filter's overhead"). Not a reduction
        // in the loop above: one kept GCC 13 from vectorising it.
        for (int k0 = 0; k0 < n; k0 += kDummySlots)
            if (any_flag16(idx + k0)) near_blocks[n_near++] = k0;
    }
    return n_near;
}
static_assert(kRowPad >= 16, "rows are computed in blocks of 16 lanes");
