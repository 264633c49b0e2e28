// All pairs: the tasks are the bs x bs tiles of every species pair.
// A part of histogram.cpp (histogram_part.hpp).
#pragma once
#include "histogram_part.hpp"

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
