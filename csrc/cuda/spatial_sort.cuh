// Spatial order of a frame for the periodic all-pairs kernels (host code).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace fastrdf {
namespace gpu {
namespace detail {

// Spatial order for the periodic all-pairs kernels: each species block of `in` counting-sorted
// into `out` by the Morton (Z-order) code of a grid of 2^b cells per axis over the frame's
// bounds [lo, hi], about two atoms per cell (Morton keeps a run of consecutive cells compact in
// all three axes, unlike row-major order: I. Al-Kharusi & D. W. Walker, Int. J. High Perform.
// Comput. Appl. 33, 998 (2019), doi:10.1177/1094342019846282). A chunk of kChunk consecutive
// j atoms then spans
// a few cells, so one image usually serves a thread for all of it (tile_pairs). The histogram
// does not depend on the order: the distance of (i, j) is that of (j, i) bit for bit, and the
// labels travel with the atoms (w). run() sorts from a copy of the packed frame (staging)
// back into the pinned buffer: one more pass over the frame, for sorted frames only.
void sort_spatially(const float4* in, float4* out, const int64_t* offsets, int n_species,
                    const float lo[3], const float hi[3], std::vector<uint32_t>& key,
                    std::vector<uint32_t>& count);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
