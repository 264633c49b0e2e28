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
// The kernel's parts live in histogram_*.hpp, included below inside this file's namespaces, so
// that they stay one translation unit per instruction set.
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
#define FASTRDF_HISTOGRAM_PART 1  // the histogram_*.hpp parts below may be included

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

// The kernel's parts, by job, in this translation unit (and namespace):
#include "histogram_images.hpp"  // one image for a block of j atoms (cell lists)
#include "histogram_rows.hpp"    // a row's bin indices (SIMD)
#include "histogram_thread.hpp"  // a thread's histograms and rows; the threads
#include "histogram_tiles.hpp"   // all pairs: tiles
#include "histogram_cells.hpp"   // cell lists

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
