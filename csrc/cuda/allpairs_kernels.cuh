// The all-pairs kernel and its launcher (device code and the host code that launches it);
// included by the allpairs_<box>.cu translation units only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "allpairs.cuh"
#include "common.cuh"
#include "counters.cuh"
#include "filter.cuh"
#include "tile_pairs.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

// Threads: block size (kThreads; kWideThreads for the packed kernel and for 32-bit windows
// too wide for two blocks of kThreads per multiprocessor, so that one block still keeps 32
// warps busy).
template <typename T, class Box, class Rule, bool Labels, bool Global, bool Windowed,
          bool Packed = false, int Threads = kThreads>
__global__ void __launch_bounds__(Threads)
    histogram_kernel(const KernelArgs a, const Box box, const Rule rule) {
    FASTRDF_BLOCK_SHARED(Threads);

    const Task t = a.tasks[blockIdx.x];
    const int lo = blockIdx.y * a.window;
    const int w = min(a.nbins - lo, a.window);
    const unsigned mult = (t.flags & kTwice) ? 2u : 1u;
    unsigned long long* out = a.out + static_cast<std::size_t>(t.pair) * a.nbins;
    // Packed: words of two counters, then one dummy word per lane
    const int half = packed_counter_words(a.window);
    const int stride = slots(a.window);
    uint32_t* mine = Packed ? hist : hist + ((threadIdx.x >> 5) % a.copies) * stride;
    const int words = Packed ? packed_words(a.window) : a.copies * stride;
    const uint32_t dummy =
        Packed ? static_cast<uint32_t>(__cvta_generic_to_shared(hist + half + (threadIdx.x & 31))) : 0u;
    if (!Global)
        for (int k = threadIdx.x; k < words; k += Threads) hist[k] = 0u;

    float4 ai[kRows];
    int ii[kRows];
    const float nan = __int_as_float(0x7fc00000);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        // a warp's rows: kRows runs of 32 consecutive atoms, one after the other (compact in
        // space when the frame is sorted: fewer chunks where the warp needs two images)
        ii[r] = t.i0 + (threadIdx.x & ~31u) * kRows + r * 32 + (threadIdx.x & 31u);
        ai[r] = ii[r] < t.i1 ? a.atoms[ii[r]] : make_float4(nan, nan, nan, 0.f);
    }
    const bool tri = t.flags & kTriangle;
    constexpr bool kDense = kDenseKernel<T, Box, Rule, Labels, Global, Windowed, Packed>;
    const bool dense = kDense && a.all_in_range && !tri && t.i1 - t.i0 == Threads * kRows;
    const bool one_image = a.chunk_images;
    unsigned chunks[3] = {0u, 0u, 0u};
    // double precision through the float filter: this warp's queue of flagged pairs, after the
    // counters (filter.cuh)
    constexpr bool kFilter = is_filter<Rule>;
    std::conditional_t<kFilter, FilterQueue, NoQueue> fq;
    if constexpr (kFilter) {
        const int queue_words = (Global ? 0 : (words + 1) & ~1);
        fq.q = reinterpret_cast<int2*>(hist + queue_words) + (threadIdx.x >> 5) * kQueue;
        fq.atoms = a.atoms;
    }

    for (int jb = t.j0; jb < t.j1; jb += Threads) {
        __syncthreads();
        const int j = jb + threadIdx.x;
        load_tile<Box>(jt, jbox, a.atoms, j, j < t.j1);
        __syncthreads();
        const int nj = min(Threads, t.j1 - jb);
        if (tri)
            tile_pairs<T, Box, Rule, Labels, Global, Windowed, true, Packed>(
                ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, lo, w, dummy, one_image, chunks, fq);
        else if (dense)
            tile_pairs<T, Box, Rule, Labels, Global, Windowed, false, Packed, kRows, kDense>(
                ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, lo, w, dummy, one_image, chunks, fq);
        else
            tile_pairs<T, Box, Rule, Labels, Global, Windowed, false, Packed>(
                ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, lo, w, dummy, one_image, chunks, fq);
    }
    if constexpr (kFilter) {
        // the pairs still queued (dense tasks counted them in float: corrected then)
        const Counters c = make_counters<Rule, Global, Packed>(mine, dummy, lo, w, out, mult);
        if (dense)
            drain<Box, Rule, Global, Windowed, Packed, kDense>(fq, box, rule, c);
        else
            drain<Box, Rule, Global, Windowed, Packed, false>(fq, box, rule, c);
        if (blockIdx.y == 0) add_settled(a.stats, fq);
    }
    if (blockIdx.y == 0) add_chunk_stats(a.stats, chunks);
    if (Packed) {
        __syncthreads();
        for (int k = threadIdx.x; k < half; k += Threads) {
            const uint32_t v = hist[k];
            // counter w (the slot beyond the window) belongs to bin w - 1
            const int b0 = min(2 * k, w - 1), b1 = min(2 * k + 1, w - 1);
            if (2 * k <= w && (v & 0xFFFFu))
                atomicAdd(out + lo + b0, static_cast<unsigned long long>(v & 0xFFFFu) * mult);
            if (2 * k + 1 <= w && (v >> 16))
                atomicAdd(out + lo + b1, static_cast<unsigned long long>(v >> 16) * mult);
        }
    } else if (!Global) {
        __syncthreads();
        for (int k = threadIdx.x; k < w; k += Threads) {
            const unsigned long long s = copies_sum(hist, a.copies, stride, k, w);
            if (s) atomicAdd(out + lo + k, s * mult);
        }
    }
}

template <typename T, class Box, class Rule>
void launch_allpairs(LaunchInfo& launch, const KernelArgs& a, const Box& box, const Rule& rule,
                     bool labels, long long n_tasks, cudaStream_t stream) {
    const bool global = launch.kernel == "global";
    const bool packed = launch.kernel == "packed";
    std::size_t hist_words = global ? 0
                             : packed ? std::size_t(packed_words(launch.window))
                                      : std::size_t(launch.copies) * slots(launch.window);
    // the filter's queues after the counters, 8-byte aligned (histogram_kernel)
    if (is_filter<Rule>) hist_words = (hist_words + 1) / 2 * 2;
    const std::size_t smem = std::size_t(tile_bytes(launch.threads)) + hist_words * 4 +
                             (is_filter<Rule> ? std::size_t(queue_bytes(launch.threads)) : 0);
    const dim3 grid(static_cast<unsigned>(n_tasks), static_cast<unsigned>(launch.sweeps));
    // whether the dense kernels run (their full tiles off the diagonal): the template
    // condition with this launch's labels, kernel and sweeps
    launch.dense = a.all_in_range && !labels && !global && launch.sweeps == 1 &&
                   kDenseKernel<T, Box, Rule, false, false, false, false>;
    auto go = [&](auto kernel) {
        if (smem > 48 * 1024)
            check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)),
                  "cudaFuncSetAttribute");
        kernel<<<grid, launch.threads, smem, stream>>>(a, box, rule);
        check(cudaGetLastError(), "the histogram kernel launch");
    };
    if (packed) {
        constexpr int P = kPackedThreads;
        if (launch.sweeps > 1) {
            if (labels) go(histogram_kernel<T, Box, Rule, true, false, true, true, P>);
            else go(histogram_kernel<T, Box, Rule, false, false, true, true, P>);
        } else {
            if (labels) go(histogram_kernel<T, Box, Rule, true, false, false, true, P>);
            else go(histogram_kernel<T, Box, Rule, false, false, false, true, P>);
        }
    } else if (global) {
        if (labels) go(histogram_kernel<T, Box, Rule, true, true, false>);
        else go(histogram_kernel<T, Box, Rule, false, true, false>);
    } else if (launch.sweeps > 1) {
        if (labels) go(histogram_kernel<T, Box, Rule, true, false, true>);
        else go(histogram_kernel<T, Box, Rule, false, false, true>);
    } else if (launch.threads == kWideThreads) {
        constexpr int W = kWideThreads;
        if (labels) go(histogram_kernel<T, Box, Rule, true, false, false, false, W>);
        else go(histogram_kernel<T, Box, Rule, false, false, false, false, W>);
    } else {
        if (labels) go(histogram_kernel<T, Box, Rule, true, false, false>);
        else go(histogram_kernel<T, Box, Rule, false, false, false>);
    }
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
