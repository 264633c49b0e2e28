// One thread's private uint32 histograms (flushed into the uint64 totals before a bin could
// wrap), the row loop every kernel shares, and the threads that take the tasks.
// A part of histogram.cpp (histogram_part.hpp).
#pragma once
#include "histogram_part.hpp"

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
