// The all-pairs kernels: their task list and arguments, and the host launcher of every
// kernel variant (instantiated in allpairs_<box>.cu, one translation unit per box type, so
// that they compile in parallel).
#pragma once

#include <cuda_runtime.h>

#include "binning.cuh"
#include "common.cuh"
#include "filter.cuh"
#include "fastrdf/cuda.hpp"
#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"
#include "instances.cuh"

#ifndef FASTRDF_CUDA_FAST_RULE
#define FASTRDF_CUDA_FAST_RULE 0
#endif

namespace fastrdf {
namespace gpu {
namespace detail {

// One block's work: pairs (i, j) with i in [i0, i1) and j in [j0, j1) of one species pair.
struct Task {
    int pair, i0, i1, j0, j1, flags;
};
constexpr int kTriangle = 1;  // same species, ranges overlap: skip j <= i
constexpr int kTwice = 2;     // same species: each unordered pair counts twice

struct KernelArgs {
    const float4* atoms;
    const Task* tasks;
    unsigned long long* out;  // n_pairs * nbins
    int nbins;
    int window;  // bins per sweep (shared kernel)
    int copies;  // sub-histograms per block (shared kernel)
    int all_in_range;  // no pair of the frame beyond r_max (host bound, run())
    int chunk_images;  // periodic: try one image per chunk of j atoms (common_image)
    unsigned long long* stats;  // [chunks with one image, with one index, all], summed over warps
};

// Launches the variant of histogram_kernel that `launch` describes (kernel, sweeps, threads,
// window, copies; labels or not) over n_tasks tasks on `stream`, and sets launch.dense.
template <typename T, class Box, class Rule>
void launch_allpairs(LaunchInfo& launch, const KernelArgs& a, const Box& box, const Rule& rule,
                     bool labels, long long n_tasks, cudaStream_t stream);

#define FASTRDF_ALLPAIRS_LAUNCHER(T, Box, Rule)                                              \
    void launch_allpairs<T, Box, Rule>(LaunchInfo&, const KernelArgs&, const Box&, const Rule&, \
                                       bool, long long, cudaStream_t)
// The launchers of box template B: every rule that Histogrammer::Impl::with_rule<T, true>
// hands them. EXTERN: `extern` (declarations, below) or nothing (allpairs_<box>.cu).
// FastRule (the approximate root, exact_sqrt=False) only in builds with
// FASTRDF_CUDA_FAST_RULE=ON: it measured slower than FloatRule and is kept for experiments.
#if FASTRDF_CUDA_FAST_RULE
#define FASTRDF_ALLPAIRS_FAST(EXTERN, B) \
    EXTERN template FASTRDF_ALLPAIRS_LAUNCHER(float, B<float>, FastRule);
#else
#define FASTRDF_ALLPAIRS_FAST(EXTERN, B)
#endif
#define FASTRDF_ALLPAIRS_INSTANCES(EXTERN, B) \
    FASTRDF_ALLPAIRS_FAST(EXTERN, B)          \
    FASTRDF_RULE_INSTANCES(FASTRDF_ALLPAIRS_LAUNCHER, EXTERN, B)

FASTRDF_EXTERN_INSTANCES(FASTRDF_ALLPAIRS_INSTANCES, FASTRDF_ALLPAIRS_LAUNCHER)

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
