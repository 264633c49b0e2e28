// The cell-list kernel and its launcher (device code and the host code that launches it);
// included by the cells_<box>.cu translation units only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cells.cuh"
#include "common.cuh"
#include "counters.cuh"
#include "filter.cuh"
#include "tile_pairs.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

template <bool Global>
__device__ __forceinline__ void flush_cells(uint32_t* hist, int copies, int nbins, unsigned long long* out,
                                            unsigned mult) {
    if (Global) return;
    __syncthreads();
    const int stride = slots(nbins);
    for (int b = threadIdx.x; b < nbins; b += kCellThreads) {
        const unsigned long long s = copies_sum(hist, copies, stride, b, nbins);
        for (int c = 0; c < copies; ++c) {  // the slots this thread read, and only those
            hist[c * stride + b] = 0u;
            if (b == nbins - 1) hist[c * stride + nbins] = 0u;
        }
        if (s) atomicAdd(out + b, s * mult);
    }
    __syncthreads();
}

template <typename T, class Box, class Rule, bool Labels, bool Global>
__global__ void __launch_bounds__(kCellThreads)
    cell_kernel(const CellKernelArgs a, const Box box, const Rule rule) {
    FASTRDF_BLOCK_SHARED(kCellThreads);

    const CellTask t = a.tasks[blockIdx.x];
    const int sa = a.pairs[2 * t.pair], sb = a.pairs[2 * t.pair + 1];
    const bool tri = sa == sb && t.col == t.ncol;
    const unsigned mult = sa == sb ? 2u : 1u;
    unsigned long long* out = a.out + static_cast<std::size_t>(t.pair) * a.nbins;
    const int* st_a = a.start + static_cast<std::size_t>(sa) * (a.n_cells + 1) + t.col * a.n2;
    const int* st_b = a.start + static_cast<std::size_t>(sb) * (a.n_cells + 1) + t.ncol * a.n2;
    uint32_t* mine = hist + ((threadIdx.x >> 5) % a.copies) * slots(a.nbins);
    if (!Global)
        for (int b = threadIdx.x; b < a.copies * slots(a.nbins); b += kCellThreads) hist[b] = 0u;
    // pairs binned since the last flush: below 2^32, so no uint32 bin can wrap
    unsigned long long since = 0;
    const unsigned long long limit = 0xffffffffull;

    const int c_end = st_a[a.n2];
    const float nan = __int_as_float(0x7fc00000);
    unsigned chunks[3] = {0u, 0u, 0u};
    // double precision through the float filter: this warp's queue of flagged pairs, after the
    // counters (filter.cuh), settled before every flush
    constexpr bool kFilter = is_filter<Rule>;
    std::conditional_t<kFilter, FilterQueue, NoQueue> fq;
    Counters counters;
    if constexpr (kFilter) {
        const int words = Global ? 0 : (a.copies * slots(a.nbins) + 1) & ~1;
        fq.q = reinterpret_cast<int2*>(hist + words) + (threadIdx.x >> 5) * kQueue;
        fq.atoms = a.atoms;
        counters = make_counters<Rule, Global, false>(mine, 0u, 0, a.nbins, out, mult);
    }
    for (int c0 = st_a[0] + t.part * kCellThreads; c0 < c_end; c0 += a.parts * kCellThreads) {
        const int c1 = min(c0 + kCellThreads, c_end);
        const int zlo = a.zcell[c0], zhi = a.zcell[c1 - 1];
        // neighbour cells along axis 2 of every cell of the chunk: one or two ranges
        int r0[2], r1[2], nr = 1;
        const int lo = zlo - a.k, hi = zhi + a.k;
        if (!a.periodic) {
            r0[0] = max(lo, 0);
            r1[0] = min(hi, a.n2 - 1);
        } else if (hi - lo + 1 >= a.n2) {
            r0[0] = 0;
            r1[0] = a.n2 - 1;
        } else if (lo < 0) {
            r0[0] = 0; r1[0] = hi;
            r0[1] = lo + a.n2; r1[1] = a.n2 - 1;
            nr = 2;
        } else if (hi >= a.n2) {
            r0[0] = lo; r1[0] = a.n2 - 1;
            r0[1] = 0; r1[1] = hi - a.n2;
            nr = 2;
        } else {
            r0[0] = lo;
            r1[0] = hi;
        }
        float4 ai[1];
        int ii[1];
        ii[0] = c0 + static_cast<int>(threadIdx.x);
        ai[0] = ii[0] < c1 ? a.atoms[ii[0]] : make_float4(nan, nan, nan, 0.f);
        for (int r = 0; r < nr; ++r) {
            int j0 = st_b[r0[r]];
            const int j1 = st_b[r1[r] + 1];
            if (tri) j0 = max(j0, c0 + 1);  // only j > i
            for (int jp = j0; jp < j1; jp += (1 << 24)) {
                const int jq = min(j1, jp + (1 << 24));
                const unsigned long long pairs = static_cast<unsigned long long>(c1 - c0) * (jq - jp);
                if (!Global && since + pairs > limit) {
                    if constexpr (kFilter) drain<Box, Rule, Global, false, false, false>(fq, box, rule, counters);
                    flush_cells<Global>(hist, a.copies, a.nbins, out, mult);
                    since = 0;
                }
                since += pairs;
                for (int jb = jp; jb < jq; jb += kCellThreads) {
                    __syncthreads();
                    const int j = jb + threadIdx.x;
                    load_tile<Box>(jt, jbox, a.atoms, j, j < jq);
                    __syncthreads();
                    const int nj = min(kCellThreads, jq - jb);
                    if (tri)
                        tile_pairs<T, Box, Rule, Labels, Global, false, true, false, 1>(
                            ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, 0, a.nbins, 0u,
                            a.chunk_images, chunks, fq);
                    else
                        tile_pairs<T, Box, Rule, Labels, Global, false, false, false, 1>(
                            ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, 0, a.nbins, 0u,
                            a.chunk_images, chunks, fq);
                }
            }
        }
    }
    if constexpr (kFilter) {
        drain<Box, Rule, Global, false, false, false>(fq, box, rule, counters);
        add_settled(a.stats, fq);
    }
    add_chunk_stats(a.stats, chunks);
    flush_cells<Global>(hist, a.copies, a.nbins, out, mult);
}

template <typename T, class Box, class Rule>
void launch_cells(const LaunchInfo& launch, const CellKernelArgs& a, const Box& box, const Rule& rule,
                  bool labels, long long n_cell_tasks, cudaStream_t stream) {
    const bool global = launch.kernel == "global";
    std::size_t hist_words = global ? 0 : std::size_t(launch.copies) * slots(a.nbins);
    // the filter's queues after the counters, 8-byte aligned (cell_kernel)
    if (is_filter<Rule>) hist_words = (hist_words + 1) / 2 * 2;
    const std::size_t smem = tile_bytes(kCellThreads) + hist_words * 4 +
                             (is_filter<Rule> ? std::size_t(queue_bytes(kCellThreads)) : 0);
    auto go = [&](auto kernel) {
        if (smem > 48 * 1024)
            check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)),
                  "cudaFuncSetAttribute");
        kernel<<<static_cast<unsigned>(n_cell_tasks), kCellThreads, smem, stream>>>(a, box, rule);
        check(cudaGetLastError(), "the cell-list kernel launch");
    };
    if (global) {
        if (labels) go(cell_kernel<T, Box, Rule, true, true>);
        else go(cell_kernel<T, Box, Rule, false, true>);
    } else {
        if (labels) go(cell_kernel<T, Box, Rule, true, false>);
        else go(cell_kernel<T, Box, Rule, false, false>);
    }
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
