// CPU pair-distance histogram kernel for one frame and all species pairs.
//
// Compiled once per instruction set (FASTRDF_ISA = baseline | avx2 | avx512 | native); the
// dispatcher picks the best one the CPU supports. Design after CADISHI (K. Reuter &
// J. Köfinger, Comput. Phys. Commun. 236, 274 (2019), doi:10.1016/j.cpc.2018.10.018, Sec. 3.1):
//   * the pairs of every species pair are cut into bs x bs tiles (bs from L2 size, Eq. 6);
//     all tiles of all pairs form one task list that OpenMP threads take dynamically;
//   * for each row of a tile a SIMD loop writes bin indices into a small index buffer (out of
//     range pairs go to one of 16 dummy slots, so the loop has no branch), then a scalar loop
//     increments the thread's private uint32 histogram;
//   * private histograms are flushed into the uint64 totals before any bin could wrap;
//   * a species with itself is done once (i < j) and counted twice, plus the i == j pairs at
//     distance 0, which is how MDAnalysis's InterRDF counts g1 == g2.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "fastrdf/cells.hpp"
#include "fastrdf/cpu.hpp"
#include "fastrdf/geometry.hpp"
#include "fastrdf/kernel_api.hpp"

#ifndef FASTRDF_ISA
#error "FASTRDF_ISA must name the instruction-set variant"
#endif
#ifndef FASTRDF_COMPACT
#define FASTRDF_COMPACT 1
#endif

namespace fastrdf {
namespace cpu {
namespace FASTRDF_ISA {

namespace {

constexpr int kDummySlots = 16;
constexpr uint32_t kNearFlag = 0x80000000u;

// Per-thread slices are padded to whole cache lines (plus one) so threads never share a line.
inline std::size_t thread_hist_len(const FrameProblem& p) {
    const std::size_t n = (static_cast<std::size_t>(p.nbins) + kDummySlots) * p.n_pairs;
    return (n + 15) / 16 * 16 + 16;
}
inline std::size_t thread_since_len(const FrameProblem& p) {
    return (static_cast<std::size_t>(p.n_pairs) + 7) / 8 * 8 + 8;
}

// The image every pair of a block of 16 j atoms takes with every row of a cell (cell lists,
// periodic boxes): kOwn, each pair its own (dist2); kShift, the shift s for all (reduce(d, s),
// the same r2 bit for bit: common_image, geometry.hpp); kZero, the shift 0 for all (norm(d)).
enum BlockKind : int { kOwn = 0, kShift = 1, kZero = 2 };
template <typename T>
struct BlockImage {
    T s[3];
    int kind;
};

// Atoms of a cell's run (rows) or of a block: bounds of the coordinates and, triclinic boxes,
// of the projections f[k] . x (TriclinicBox::projection, precomputed per atom in proj).
struct AtomBounds {
    float lo[3], hi[3];
    double plo[3], phi[3];
    void take(const float* x, const float* y, const float* z, const double* proj, int64_t a0, int64_t a1) {
        lo[0] = hi[0] = x[a0];
        lo[1] = hi[1] = y[a0];
        lo[2] = hi[2] = z[a0];
        for (int64_t k = a0 + 1; k < a1; ++k) {
            lo[0] = std::min(lo[0], x[k]);
            lo[1] = std::min(lo[1], y[k]);
            lo[2] = std::min(lo[2], z[k]);
            hi[0] = std::max(hi[0], x[k]);
            hi[1] = std::max(hi[1], y[k]);
            hi[2] = std::max(hi[2], z[k]);
        }
        if (!proj) return;
        for (int c = 0; c < 3; ++c) plo[c] = phi[c] = proj[3 * a0 + c];
        for (int64_t k = a0 + 1; k < a1; ++k)
            for (int c = 0; c < 3; ++c) {
                plo[c] = std::min(plo[c], proj[3 * k + c]);
                phi[c] = std::max(phi[c], proj[3 * k + c]);
            }
    }
};

// Certifies the blocks of 16 j atoms [j0 + 16 m, j0 + 16 m + 16) of [j0, j1) against rows
// whose coordinates lie within rows.lo, rows.hi: every displacement fl(xj - xi) lies within
// [fl(lo_j - hi_i), fl(hi_j - lo_i)] per component (rounding is monotone), so when the two
// corners get one image (common_image), every pair of the block does. Triclinic boxes try the
// tighter projections first (TriclinicBox::common_image_projected; perr: the error of the
// projections' bounds, from the largest |coordinate| per axis, xmax).
template <typename T, class Box>
void certify_blocks(const Box& box, const float* x, const float* y, const float* z,
                    const double* proj, const double (&xmax)[3], int64_t j0, int64_t j1,
                    const AtomBounds& rows, BlockImage<T>* out, uint64_t (&kinds)[3]) {
    for (int64_t b0 = j0; b0 < j1; b0 += kDummySlots) {
        AtomBounds blk;
        blk.take(x, y, z, proj, b0, std::min<int64_t>(b0 + kDummySlots, j1));
        BlockImage<T>& o = out[(b0 - j0) / kDummySlots];
        bool one = false;
        if constexpr (is_triclinic<Box>) {
            double plo[3], phi[3], perr[3], dmax[3];
            for (int c = 0; c < 3; ++c) {
                plo[c] = blk.plo[c] - rows.phi[c];
                phi[c] = blk.phi[c] - rows.plo[c];
                dmax[c] = std::max(double(blk.hi[c]) - double(rows.lo[c]),
                                   double(rows.hi[c]) - double(blk.lo[c]));
            }
            for (int k = 0; k < 3; ++k)
                perr[k] = 0x1p-47 * (std::fabs(double(box.f[k][0])) * xmax[0] +
                                     std::fabs(double(box.f[k][1])) * xmax[1] +
                                     std::fabs(double(box.f[k][2])) * xmax[2]);
            one = box.common_image_projected(plo, phi, perr, dmax, o.s);
        }
        if (!one) {
            const T dl[3] = {static_cast<T>(blk.lo[0] - rows.hi[0]), static_cast<T>(blk.lo[1] - rows.hi[1]),
                             static_cast<T>(blk.lo[2] - rows.hi[2])};
            const T dh[3] = {static_cast<T>(blk.hi[0] - rows.lo[0]), static_cast<T>(blk.hi[1] - rows.lo[1]),
                             static_cast<T>(blk.hi[2] - rows.lo[2])};
            one = box.common_image(dl, dh, o.s);
        }
        if (!one)
            o.kind = kOwn;
        else if (has_norm<Box>::value && o.s[0] == T(0) && o.s[1] == T(0) && o.s[2] == T(0))
            o.kind = kZero;
        else
            o.kind = kShift;
        ++kinds[o.kind];
    }
}

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

// Double precision through the float filter (double_filter_delta, kernel_api.hpp): the box
// and binning in double that settle the pairs the float kernel flags. NoSettle: no filter.
struct NoSettle {};
template <class BoxD>
struct Settle {
    BoxD box;
    Binning<double> bin;
};

// One thread's private histograms and the row loop every kernel shares: a row is atom i
// against the contiguous atoms [js, js + n) of the (possibly sorted) coordinate arrays of q.
template <typename T, class Box, bool Labels, bool Exact, class S>
struct ThreadHist {
    static constexpr bool kFilter = !std::is_same<S, NoSettle>::value;
    const FrameProblem& q;
    const Box& box;
    const Binning<T>& bin;
    const S* settle;                // kFilter: the double box and binning
    T filter;                       // kFilter: the bound of double_filter_delta
    uint32_t* hist;
    uint64_t* since;
    uint32_t* idx;
    std::size_t stride;
    uint64_t limit;                 // flush before `since` would exceed this (UINT32_MAX)
    std::atomic<bool>* overfull;    // set if one reservation alone exceeded limit (a bug)
    uint64_t settled = 0;           // kFilter: pairs recomputed in double
    int* near_blocks;               // kFilter: row_indices' blocks with a flag (row_len / 16 + 1)

    void flush(int pair) {
        const bool same = q.pairs[2 * pair] == q.pairs[2 * pair + 1];
        uint32_t* h = hist + pair * stride;
        uint64_t* o = q.out + static_cast<std::size_t>(pair) * q.nbins;
        for (int b = 0; b < q.nbins; ++b) {
            if (h[b]) {
                const uint64_t v = same ? 2 * static_cast<uint64_t>(h[b]) : h[b];
                __atomic_fetch_add(o + b, v, __ATOMIC_RELAXED);
            }
        }
        std::memset(h, 0, stride * sizeof(uint32_t));
        since[pair] = 0;
    }

    // Announce n more pairs of `pair`; flushes first if a bin could wrap. Callers announce at
    // most `limit` pairs at a time (rows_per_reservation), so a bin never passes 2^32 - 1.
    void reserve(int pair, uint64_t n) {
        if (since[pair] + n > limit) flush(pair);
        since[pair] += n;
        if (n > limit) overfull->store(true, std::memory_order_relaxed);
    }

    // Rows i0 .. i1 - 1 of at most `len` pairs each, cut into chunks of at most `limit` pairs;
    // row(i) runs one row. (A single strip of a cell grid can hold more than 2^32 pairs when
    // many atoms share a cell.)
    template <class Row>
    void rows(int pair, int64_t i0, int64_t i1, uint64_t len, Row&& row_fn) {
        if (len == 0) return;
        const int64_t per = static_cast<int64_t>(std::max<uint64_t>(1, limit / len));
        for (int64_t c0 = i0; c0 < i1; c0 += per) {
            const int64_t c1 = std::min(i1, c0 + per);
            reserve(pair, static_cast<uint64_t>(c1 - c0) * len);
            for (int64_t i = c0; i < c1; ++i) row_fn(i);
        }
    }

    void row(int pair, int64_t i, int64_t js, int n, const BlockImage<T>* blocks = nullptr) {
        uint32_t* h = hist + pair * stride;
        const uint32_t nbu = static_cast<uint32_t>(q.nbins);
        const int n_near = row_indices<T, Box, Labels, Exact, kFilter>(
            q.x + js, q.y + js, q.z + js, Labels ? q.labels + js : nullptr, n, q.x[i], q.y[i],
            q.z[i], Labels ? q.labels[i] : 0, box, bin, filter, blocks, idx, near_blocks);
        const int n_pad = (n + kDummySlots - 1) / kDummySlots * kDummySlots;
        for (int k = n; k < n_pad; ++k) idx[k] = nbu;  // lanes past the row go to a dummy slot
        if constexpr (kFilter) {
            // the distance of pair (i, js + k) in double
            auto r_double = [&](int k) {
                const int64_t j = js + k;
                return std::sqrt(pair_dist2(settle->box, q.x[i], q.y[i], q.z[i], q.x[j], q.y[j], q.z[j]));
            };
#if defined(FASTRDF_CHECK_FILTER)
            // test builds (tests/sanitize_cpu.sh): every pair the filter did not flag must have
            // the range decision and the bin of the all-double arithmetic
            for (int k = 0; k < n; ++k) {
                if (idx[k] & kNearFlag) continue;
                const int64_t j = js + k;
                const double r = r_double(k);
                const bool counted = settle->bin.in_range(r) && !(Labels && q.labels[j] == q.labels[i]);
                if (counted != (idx[k] < nbu) ||
                    (counted && idx[k] != static_cast<uint32_t>(settle->bin.exact_bin(r))))
                    __builtin_trap();
            }
#endif
            // The flagged pairs (near an edge or the range's ends in float): their distance in
            // double, range and bin against numpy's edges, as the all-double kernel.
            for (int m = 0; m < n_near; ++m) {
                const int k1 = std::min(n, near_blocks[m] + kDummySlots);
                for (int k = near_blocks[m]; k < k1; ++k) {
                    if (!(idx[k] & kNearFlag)) continue;
                    const double r = r_double(k);
                    if (settle->bin.in_range(r)) ++h[settle->bin.exact_bin(r)];
                    idx[k] = nbu;
                    ++settled;
                }
            }
        }
#if FASTRDF_COMPACT
        if (!Exact) {
            // Single precision (no pair needs a second look): pack the in-range bins to the
            // front of idx, then increment only those.
            int m = 0;
#if defined(__AVX512F__)
            const __m512i vnb = _mm512_set1_epi32(static_cast<int>(nbu));
            for (int k0 = 0; k0 < n_pad; k0 += 16) {
                const __m512i v = _mm512_loadu_si512(idx + k0);
                const __mmask16 in = _mm512_cmplt_epu32_mask(v, vnb);
                _mm512_storeu_si512(idx + m, _mm512_maskz_compress_epi32(in, v));
                m += __builtin_popcount(static_cast<unsigned>(in));
            }
#else
            for (int k = 0; k < n; ++k) {
                const uint32_t b = idx[k];
                idx[m] = b;
                m += b < nbu;
            }
#endif
            // restrict: the histogram and the index buffer never overlap, so the compiler
            // need not reload its pointers after every increment
            uint32_t* __restrict hr = h;
            const uint32_t* __restrict ir = idx;
            for (int k = 0; k < m; ++k) ++hr[ir[k]];
            return;
        }
#endif
        // Increment in chunks of 16; a chunk whose pairs all fell out of range (the common
        // case when r_max is well below the box) is skipped after one vectorised test. Dummy
        // slots take the out-of-range pairs of the others.
        for (int k0 = 0; k0 < n_pad; k0 += kDummySlots) {
            const uint32_t* chunk = idx + k0;
            uint32_t any = 0;
            for (int k = 0; k < kDummySlots; ++k)
                any |= static_cast<uint32_t>((chunk[k] & ~kNearFlag) < nbu);
            if (!any) continue;
            for (int k = k0; k < k0 + kDummySlots; ++k) {
                uint32_t b = idx[k];
                if (Exact && (b & kNearFlag)) {
                    // Rare: recompute this pair's distance (same arithmetic) and settle the
                    // bin against numpy's edges.
                    const int64_t j = js + k;
                    const T r = std::sqrt(
                        pair_dist2(box, q.x[i], q.y[i], q.z[i], q.x[j], q.y[j], q.z[j]));
                    b = static_cast<uint32_t>(bin.exact_bin(r));
                }
                ++h[b];
            }
        }
    }
};

// Runs body(thread_hist, task) for every task 0 .. n_tasks - 1 on p.n_threads threads taking
// tasks dynamically, then flushes every thread's histograms. q: the problem whose coordinate
// arrays the rows read (the frame's, or the sorted copy of a cell grid).
template <typename T, class Box, bool Labels, bool Exact, class S, class Body>
void run_threads(const FrameProblem& q, Workspace& ws, const Box& box, const Binning<T>& bin,
                 const S* settle, T filter, std::size_t row_len, int64_t n_tasks, Body&& body) {
    const std::size_t stride = static_cast<std::size_t>(q.nbins) + kDummySlots;
    const std::size_t hist_len = thread_hist_len(q);
    const int nt = q.n_threads;
    ws.thread_hist.resize(hist_len * nt);
    ws.thread_idx.resize((row_len + kDummySlots) * nt);
    const std::size_t near_len = row_len / kDummySlots + 1;
    ws.thread_near.resize(near_len * nt);
    ws.thread_since_flush.resize(thread_since_len(q) * nt);

    std::atomic<int64_t> next_task{0};
    parallel_run(nt, [&](int tid) {
        ThreadHist<T, Box, Labels, Exact, S> th{q, box, bin, settle, filter,
                                            ws.thread_hist.data() + tid * hist_len,
                                            ws.thread_since_flush.data() + tid * thread_since_len(q),
                                            ws.thread_idx.data() + tid * (row_len + kDummySlots),
                                            stride, ws.flush_limit, &ws.overfull, 0,
                                            ws.thread_near.data() + tid * near_len};
        std::memset(th.hist, 0, hist_len * sizeof(uint32_t));
        std::fill(th.since, th.since + q.n_pairs, uint64_t(0));
        // dynamic schedule: each thread takes the next task
        for (int64_t t = next_task.fetch_add(1, std::memory_order_relaxed); t < n_tasks;
             t = next_task.fetch_add(1, std::memory_order_relaxed))
            body(th, t);
        for (int pair = 0; pair < q.n_pairs; ++pair) th.flush(pair);
        if (th.settled) ws.settled.fetch_add(th.settled, std::memory_order_relaxed);
    });
}

// All pairs: the pairs of every species pair cut into bs x bs tiles.
template <typename T, class Box, bool Labels, bool Exact, class S>
void run_tiles(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
               const S* settle, T filter) {
    const std::size_t bs = block_size(p.l2_bytes, p.nbins, p.n_pairs);
    ws.tasks.clear();
    for (int pair = 0; pair < p.n_pairs; ++pair) {
        const int a = p.pairs[2 * pair], b = p.pairs[2 * pair + 1];
        const int64_t a0 = p.offsets[a], a1 = p.offsets[a + 1];
        const int64_t b0 = p.offsets[b], b1 = p.offsets[b + 1];
        for (int64_t i0 = a0; i0 < a1; i0 += bs) {
            const int64_t jstart = (a == b) ? i0 : b0;
            for (int64_t j0 = jstart; j0 < b1; j0 += bs) {
                const int64_t t[5] = {pair, i0, std::min<int64_t>(i0 + bs, a1), j0,
                                      std::min<int64_t>(j0 + bs, b1)};
                ws.tasks.insert(ws.tasks.end(), t, t + 5);
            }
        }
    }
    const int64_t n_tasks = static_cast<int64_t>(ws.tasks.size() / 5);
    run_threads<T, Box, Labels, Exact>(p, ws, box, bin, settle, filter, bs, n_tasks,
                                       [&](auto& th, int64_t t) {
        const int64_t* task = ws.tasks.data() + 5 * t;
        const int pair = static_cast<int>(task[0]);
        const int64_t i0 = task[1], i1 = task[2], j0 = task[3], j1 = task[4];
        const bool diag = p.pairs[2 * pair] == p.pairs[2 * pair + 1] && i0 == j0;
        th.rows(pair, i0, i1, static_cast<uint64_t>(j1 - j0), [&](int64_t i) {
            const int64_t js = diag ? std::max(j0, i + 1) : j0;
            const int n = static_cast<int>(j1 - js);
            if (n > 0) th.row(pair, i, js, n);
        });
    });
}

// Cell lists (cells.hpp): a task is one species pair and one column of cells (axes 0, 1) of
// its first species; each atom of the column meets the strips of its neighbour columns.
template <typename T, class Box, bool Labels, bool Exact, class S>
void run_cells(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
               const S* settle, T filter) {
    const CellGrid& g = ws.grid;
    FrameProblem q = p;  // the rows read the sorted copy
    q.x = g.x.data();
    q.y = g.y.data();
    q.z = g.z.data();
    q.labels = Labels ? g.labels.data() : nullptr;
    const int64_t n_cols = static_cast<int64_t>(g.n[0]) * g.n[1];
    const int n2 = g.n[2];
    const int64_t stride = g.n_cells + 1;
    // The longest row: 2k + 1 cells of axis 2 (or all of them).
    int64_t row_len = 1;
    for (int s = 0; s < p.n_species; ++s) {
        const int64_t* st = g.start.data() + s * stride;
        for (int64_t col = 0; col < n_cols; ++col)
            for (int z = 0; z < n2; ++z)
                for (int r = g.full_start[z]; r < g.full_start[z + 1]; ++r)
                    row_len = std::max(row_len, st[col * n2 + g.full[2 * r + 1] + 1] -
                                                    st[col * n2 + g.full[2 * r]]);
    }
    // Periodic boxes: the blocks of 16 j atoms of a strip take one image for all rows of a
    // cell when their bounds prove it (certify_blocks): most blocks of a cell grid do.
    constexpr bool kPeriodic = !std::is_same<Box, NoBox<T>>::value;
    // triclinic boxes: f[k] . x of every sorted atom, and the largest |coordinate| per axis
    const int64_t n_atoms = p.offsets[p.n_species];
    double xmax[3] = {0.0, 0.0, 0.0};
    const double* proj = nullptr;
    if constexpr (is_triclinic<Box>) {
        ws.projections.resize(static_cast<std::size_t>(3 * n_atoms));
        for (int64_t a = 0; a < n_atoms; ++a) {
            for (int k = 0; k < 3; ++k) ws.projections[3 * a + k] = box.projection(k, q.x[a], q.y[a], q.z[a]);
            xmax[0] = std::max(xmax[0], std::fabs(double(q.x[a])));
            xmax[1] = std::max(xmax[1], std::fabs(double(q.y[a])));
            xmax[2] = std::max(xmax[2], std::fabs(double(q.z[a])));
        }
        proj = ws.projections.data();
    }
    run_threads<T, Box, Labels, Exact>(q, ws, box, bin, settle, filter,
                                       static_cast<std::size_t>(row_len), p.n_pairs * n_cols,
                                       [&](auto& th, int64_t t) {
        thread_local std::vector<BlockImage<T>> blocks;
        uint64_t kinds[3] = {0, 0, 0};
        const int pair = static_cast<int>(t / n_cols);
        const int64_t col = t % n_cols;
        const int a = p.pairs[2 * pair], b = p.pairs[2 * pair + 1];
        const bool same = a == b;
        const int64_t* sa = g.start.data() + a * stride + col * n2;
        const int64_t* sb_all = g.start.data() + b * stride;
        for (int32_t m = g.col_start[col]; m < g.col_start[col + 1]; ++m) {
            const int64_t ncol = g.col_nbr[m];
            if (same && ncol < col) continue;
            const bool own = ncol == col;
            const int32_t* rs = (same && own) ? g.after_start.data() : g.full_start.data();
            const int32_t* rv = (same && own) ? g.after.data() : g.full.data();
            const int64_t* sb = sb_all + ncol * n2;
            for (int z = 0; z < n2; ++z) {
                const int64_t i0 = sa[z], i1 = sa[z + 1];
                if (i0 == i1) continue;
                // Periodic boxes: the cell's atoms by image (cell_grid.cpp sorts them so), each
                // run with the bounds of its atoms for certify_blocks; else one run.
                for (int64_t r0 = i0; r0 < i1;) {
                    int64_t r1 = i1;
                    AtomBounds rows;
                    if constexpr (kPeriodic) {
                        r1 = r0 + 1;
                        while (r1 < i1 && g.image[r1] == g.image[r0]) ++r1;
                        rows.take(q.x, q.y, q.z, proj, r0, r1);
                    }
                    for (int32_t r = rs[z]; r < rs[z + 1]; ++r) {
                        const int64_t j0 = sb[rv[2 * r]], j1 = sb[rv[2 * r + 1] + 1];
                        if (j0 == j1) continue;
                        const BlockImage<T>* bi = nullptr;
                        if constexpr (kPeriodic) {
                            blocks.resize(static_cast<std::size_t>((j1 - j0) / kDummySlots + 1));
                            certify_blocks<T>(box, q.x, q.y, q.z, proj, xmax, j0, j1, rows,
                                              blocks.data(), kinds);
                            bi = blocks.data();
                        }
                        th.rows(pair, r0, r1, static_cast<uint64_t>(j1 - j0), [&](int64_t i) {
                            th.row(pair, i, j0, static_cast<int>(j1 - j0), bi);
                        });
                    }
                    r0 = r1;
                }
                if (same && own) {  // the atoms after i in its own cell
                    th.rows(pair, i0, i1 - 1, static_cast<uint64_t>(i1 - i0 - 1), [&](int64_t i) {
                        th.row(pair, i, i + 1, static_cast<int>(i1 - i - 1));
                    });
                }
            }
        }
        for (int k = 0; k < 3; ++k)
            if (kinds[k]) ws.block_images[k].fetch_add(kinds[k], std::memory_order_relaxed);
    });
}

template <typename T, class Box, bool Labels, bool Exact, class S>
void run_tasks(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
               const S* settle, T filter) {
    if (ws.used_cells)
        run_cells<T, Box, Labels, Exact>(p, ws, box, bin, settle, filter);
    else
        run_tiles<T, Box, Labels, Exact>(p, ws, box, bin, settle, filter);
}

template <typename T, bool Exact, class Box, class S>
void run_box(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
             const S* settle, T filter) {
    if (p.labels)
        run_tasks<T, Box, true, Exact>(p, ws, box, bin, settle, filter);
    else
        run_tasks<T, Box, false, Exact>(p, ws, box, bin, settle, filter);
}

// numpy's edges in float (single precision, and the float filter of double precision)
const float* float_edges(const FrameProblem& p, Workspace& ws) {
    ws.edges_f.assign(p.edges, p.edges + p.nbins + 1);
    ws.images_f.assign(p.images, p.images + 3 * p.n_images);
    return ws.edges_f.data();
}

void run_single(const FrameProblem& p, Workspace& ws) {
    const Binning<float> bin = make_binning<float>(p, float_edges(p, ws));
    with_box<float>(p, ws.images_f.data(), [&](const auto& box) {
        run_box<float, false>(p, ws, box, bin, static_cast<const NoSettle*>(nullptr), 0.f);
    });
    add_self_pairs(p, bin, p.out);
}

// Double precision: numpy's bins of the distances in double. Through the float filter when
// double_filter_delta allows it (every pair in float, the few near an edge again in double),
// else every pair in double.
void run_double(const FrameProblem& p, Workspace& ws) {
    const Binning<double> bin = make_binning<double>(p, p.edges);
    FrameImages fi;
    double delta = -1.0, band = -1.0;
    if (ws.double_filter > 0.0) {
        fi = frame_images(p);
        FilterArithmetic arith;
        arith.slab = true;  // the float kernels flag the pairs near the slab's edge
        delta = ws.double_filter * double_filter_delta(p, fi, arith);
        if (is_slab_kind(p.box_kind) && delta >= 0.0) band = ws.double_filter * slab_filter_band(p, fi);
    }
    ws.last_filter_delta = delta;
    if (delta >= 0.0) {
        const Binning<float> bin_f = make_binning<float>(p, float_edges(p, ws));
        // the bound rounded up to float: the test g < filter stays conservative
        const float filter = std::nextafter(static_cast<float>(delta), 1.0f);
        const float band_f = std::nextafter(static_cast<float>(band), 1.0f);
        with_boxes<true, true>(p, [&](const auto& box_f, const auto& box_d) {
            const Settle<std::decay_t<decltype(box_d)>> settle{box_d, bin};
            if constexpr (is_slab_box<std::decay_t<decltype(box_f)>>) {
                auto banded = box_f;  // the float box flags the images near the slab's edge
                banded.band = band_f;
                run_box<float, false>(p, ws, banded, bin_f, &settle, filter);
            } else {
                run_box<float, false>(p, ws, box_f, bin_f, &settle, filter);
            }
        }, ws.images_f.data(), p.images);
    } else {
        with_box<double>(p, p.images, [&](const auto& box) {
            run_box<double, true>(p, ws, box, bin, static_cast<const NoSettle*>(nullptr), 0.0);
        });
    }
    add_self_pairs(p, bin, p.out);
}

}  // namespace

void histogram_frame(const FrameProblem& p, Workspace& ws) {
    ws.used_cells = false;
    ws.overfull.store(false);
    for (auto& k : ws.block_images) k.store(0);
    if (p.n_pairs == 0 || p.nbins <= 0) return;
    if (p.method != kMethodAllPairs) {
        const CellPlan plan = plan_cells(p, p.cell_k, p.cell_order);
        ws.plan = plan;
        if (p.method == kMethodCells || cells_pay(plan)) {
            build_cells(p, plan, ws.grid);
            ws.used_cells = true;
        }
    }
    ws.settled.store(0);
    ws.last_filter_delta = -1.0;
    if (p.double_precision)
        run_double(p, ws);
    else
        run_single(p, ws);
}

}  // namespace FASTRDF_ISA
}  // namespace cpu
}  // namespace fastrdf
