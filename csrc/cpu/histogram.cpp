// CPU pair-distance histogram kernel for one frame and all species pairs.
//
// Compiled once per instruction set (FASTRDF_ISA = baseline | avx2 | avx512 | native); the
// dispatcher picks the best one the CPU supports. Design after CADISHI
// (../shared/papers/000_250f7fd1161c6543.txt, Sec. 3.1):
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

#include "fastrdf/cpu.hpp"
#include "fastrdf/geometry.hpp"
#include "fastrdf/kernel_api.hpp"

#ifndef FASTRDF_ISA
#error "FASTRDF_ISA must name the instruction-set variant"
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

// SIMD part: bin index (or dummy slot, or near-edge flag) of pairs (i, j0..j0+n).
template <typename T, class Box, bool Labels, bool Exact>
inline void row_indices(const float* __restrict xs, const float* __restrict ys,
                        const float* __restrict zs, const int32_t* __restrict ls, int n, float xi,
                        float yi, float zi, int32_t li, const Box& box_in, const Binning<T>& bin_in,
                        uint32_t* __restrict idx) {
    // Local copies: the compiler can keep every parameter in a register and vectorise.
    const Box box = box_in;
    const Binning<T> bin = bin_in;
    const int nb = bin.nbins;
#pragma omp simd
    for (int k = 0; k < n; ++k) {
        const T dx = static_cast<T>(xs[k] - xi);
        const T dy = static_cast<T>(ys[k] - yi);
        const T dz = static_cast<T>(zs[k] - zi);
        const T r = std::sqrt(box.dist2(dx, dy, dz));
        bool in = bin.in_range(r);
        if (Labels) in = in & (ls[k] != li);
        const T f = in ? bin.coordinate(r) : T(0);
        const int b = bin.fast_bin_of(f);
        uint32_t u = static_cast<uint32_t>(b);
        if (Exact) u |= static_cast<uint32_t>(bin.near_edge(f, b) ? 1u : 0u) << 31;
        idx[k] = in ? u : static_cast<uint32_t>(nb + (k & (kDummySlots - 1)));
    }
}

template <typename T, class Box, bool Labels, bool Exact>
void run_tasks(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
               std::size_t bs, int n_tasks) {
    const std::size_t stride = static_cast<std::size_t>(p.nbins) + kDummySlots;
    const std::size_t hist_len = thread_hist_len(p);
    const int nt = p.n_threads;
    const uint64_t flush_limit = std::numeric_limits<uint32_t>::max();

    std::atomic<int> next_task{0};
    parallel_run(nt, [&](int tid) {
        uint32_t* hist = ws.thread_hist.data() + tid * hist_len;
        uint64_t* since = ws.thread_since_flush.data() + tid * thread_since_len(p);
        std::memset(hist, 0, hist_len * sizeof(uint32_t));
        std::fill(since, since + p.n_pairs, uint64_t(0));
        uint32_t* idx = ws.thread_idx.data() + tid * (bs + kDummySlots);

        auto flush = [&](int pair) {
            const bool same = p.pairs[2 * pair] == p.pairs[2 * pair + 1];
            uint32_t* h = hist + pair * stride;
            uint64_t* o = p.out + static_cast<std::size_t>(pair) * p.nbins;
            for (int b = 0; b < p.nbins; ++b) {
                if (h[b]) {
                    const uint64_t v = same ? 2 * static_cast<uint64_t>(h[b]) : h[b];
                    __atomic_fetch_add(o + b, v, __ATOMIC_RELAXED);
                }
            }
            std::memset(h, 0, stride * sizeof(uint32_t));
            since[pair] = 0;
        };

        // dynamic schedule: each thread takes the next tile
        for (int t = next_task.fetch_add(1, std::memory_order_relaxed); t < n_tasks;
             t = next_task.fetch_add(1, std::memory_order_relaxed)) {
            const int64_t* task = ws.tasks.data() + 5 * t;
            const int pair = static_cast<int>(task[0]);
            const int64_t i0 = task[1], i1 = task[2], j0 = task[3], j1 = task[4];
            const bool diag = p.pairs[2 * pair] == p.pairs[2 * pair + 1] && i0 == j0;
            const uint64_t tile_pairs = static_cast<uint64_t>(i1 - i0) * static_cast<uint64_t>(j1 - j0);
            if (since[pair] + tile_pairs > flush_limit) flush(pair);
            since[pair] += tile_pairs;
            uint32_t* h = hist + pair * stride;
            const uint32_t nbu = static_cast<uint32_t>(p.nbins);
            for (int64_t i = i0; i < i1; ++i) {
                const int64_t js = diag ? std::max(j0, i + 1) : j0;
                const int n = static_cast<int>(j1 - js);
                if (n <= 0) continue;
                row_indices<T, Box, Labels, Exact>(p.x + js, p.y + js, p.z + js,
                                                   Labels ? p.labels + js : nullptr, n, p.x[i],
                                                   p.y[i], p.z[i], Labels ? p.labels[i] : 0, box,
                                                   bin, idx);
                // Increment in chunks of 16; a chunk whose pairs all fell out of range (the
                // common case when r_max is well below the box) is skipped after one
                // vectorised test. Dummy slots take the out-of-range pairs of the others.
                const int n_pad = (n + kDummySlots - 1) / kDummySlots * kDummySlots;
                for (int k = n; k < n_pad; ++k) idx[k] = nbu;  // padding goes to a dummy slot
                for (int k0 = 0; k0 < n_pad; k0 += kDummySlots) {
                    const uint32_t* chunk = idx + k0;
                    uint32_t any = 0;
                    for (int k = 0; k < kDummySlots; ++k)
                        any |= static_cast<uint32_t>((chunk[k] & ~kNearFlag) < nbu);
                    if (!any) continue;
                    for (int k = k0; k < k0 + kDummySlots; ++k) {
                        uint32_t b = idx[k];
                        if (Exact && (b & kNearFlag)) {
                            // Rare: recompute this pair's distance (same arithmetic) and settle
                            // the bin against numpy's edges.
                            const int64_t j = js + k;
                            const T r = std::sqrt(box.dist2(static_cast<T>(p.x[j] - p.x[i]),
                                                            static_cast<T>(p.y[j] - p.y[i]),
                                                            static_cast<T>(p.z[j] - p.z[i])));
                            b = static_cast<uint32_t>(bin.exact_bin(r));
                        }
                        ++h[b];
                    }
                }
            }
        }
        for (int pair = 0; pair < p.n_pairs; ++pair) flush(pair);
    });
}

template <typename T, class Box>
void run_box(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
             std::size_t bs, int n_tasks) {
    constexpr bool exact = std::is_same<T, double>::value;
    if (p.labels)
        run_tasks<T, Box, true, exact>(p, ws, box, bin, bs, n_tasks);
    else
        run_tasks<T, Box, false, exact>(p, ws, box, bin, bs, n_tasks);
}

template <typename T>
void run_precision(const FrameProblem& p, Workspace& ws, std::size_t bs, int n_tasks) {
    const T* edges_t;
    const T* images_t;
    if (std::is_same<T, double>::value) {
        edges_t = reinterpret_cast<const T*>(p.edges);
        images_t = reinterpret_cast<const T*>(p.images);
    } else {
        ws.edges_f.assign(p.edges, p.edges + p.nbins + 1);
        ws.images_f.assign(p.images, p.images + 3 * p.n_images);
        edges_t = reinterpret_cast<const T*>(ws.edges_f.data());
        images_t = reinterpret_cast<const T*>(ws.images_f.data());
    }
    const Binning<T> bin = make_binning<T>(p, edges_t);
    with_box<T>(p, images_t, [&](const auto& box) { run_box(p, ws, box, bin, bs, n_tasks); });
    add_self_pairs(p, bin, p.out);
}

}  // namespace

void histogram_frame(const FrameProblem& p, Workspace& ws) {
    if (p.n_pairs == 0 || p.nbins <= 0) return;
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
    const int n_tasks = static_cast<int>(ws.tasks.size() / 5);
    ws.thread_hist.resize(thread_hist_len(p) * p.n_threads);
    ws.thread_idx.resize((bs + kDummySlots) * p.n_threads);
    ws.thread_since_flush.resize(thread_since_len(p) * p.n_threads);

    if (p.double_precision)
        run_precision<double>(p, ws, bs, n_tasks);
    else
        run_precision<float>(p, ws, bs, n_tasks);
}

}  // namespace FASTRDF_ISA
}  // namespace cpu
}  // namespace fastrdf
