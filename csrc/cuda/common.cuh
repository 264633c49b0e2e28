// What every CUDA translation unit of the engine shares: the launch constants, the kernels'
// type traits and the CUDA error check (a failed call raises CudaError or OutOfMemory, which
// the bindings turn into Python exceptions carrying CUDA's own message).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "fastrdf/cuda.hpp"
#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"

namespace fastrdf {
namespace gpu {
namespace detail {

constexpr int kThreads = 256;           // threads per block
#ifndef FASTRDF_CUDA_ROWS
#define FASTRDF_CUDA_ROWS 2
#endif
constexpr int kRows = FASTRDF_CUDA_ROWS;  // i atoms per thread (register blocking)
constexpr int kCopyBudgetWords = 12288; // sub-histograms up to 48 KB per block
constexpr int kMaxSharedSweeps = 4;     // auto: more sweeps than this -> global kernel (measured,
                                        // benchmarks/NOTES.md: 4 shared sweeps beat 64-bit atomics)
constexpr int kWideThreads = 1024;      // blocks of the packed kernel and of 32-bit windows that
                                        // leave room for one block per multiprocessor: 32 warps
constexpr int kPackedThreads = kWideThreads;
constexpr uint32_t kPackedFlush = 0x8000u;  // a packed half is emptied into the totals here
constexpr int kPackedDummies = 32;      // packed: one dummy word per lane after the counters

// 32-bit shared histograms (all-pairs and cell kernels) keep window + 1 counters per
// sub-histogram: the last one takes the pairs a raw() rule puts in bin nbins (r == rmax, the
// closed right edge) and is added to the window's last bin at the flush. It stays zero for
// rules that clamp and for sweeps other than the last.
__host__ __device__ constexpr int slots(int window) { return window + 1; }

// Shared words of a packed window of `window` bins: two counters per word for slots(window)
// counters, then the dummies.
__host__ __device__ constexpr int packed_counter_words(int window) { return (slots(window) + 1) / 2; }
__host__ __device__ constexpr int packed_words(int window) {
    return packed_counter_words(window) + kPackedDummies;
}

// Shared bytes of a j tile of `threads` atoms (float4 each) and of the bounds of its chunks
// of kChunk atoms (two float4 each: lowest and highest x, y, z), which the periodic kernels
// use to take one image per chunk (common_image, geometry.hpp).
constexpr int kChunk = 32;
enum { kImageAuto = 0, kImageAlways = 1, kImageOff = 2 };
// auto: sort a periodic all-pairs frame when its atoms have this many pairs each on average
// (the host's counting sort costs about as much per atom as ~10^4 pair evaluations on the GPU)
constexpr double kSortPairsPerAtom = 16384.0;
// (Every kernel reserves the bounds, also without a box: at most 1 KB, 256 bins of a window.)
__host__ __device__ constexpr int tile_bytes(int threads) {
    return threads * 16 + (threads / kChunk) * 32;
}

// Rules with raw(r2, u) (FloatRule): the unclamped bin, biased (float_rule.cuh).
template <class Rule, class = void>
struct has_raw : std::false_type {};
template <class Rule>
struct has_raw<Rule, std::void_t<decltype(&Rule::raw)>> : std::true_type {};

// Kernels that may take the dense path: no box or an orthorhombic one (OrthoBox, not the
// MDAnalysis-scaled form), float, FloatRule from 0, one-sweep windows (32-bit or packed), no
// labels. There, when the host proved every pair of the frame within r_max (run()), a
// task whose i tile is full (no NaN padding) and that is not on a diagonal (no j > i test)
// has no pair to leave out, so its increments need no predicate: no range test and no
// branch around the atomic, four instructions less per pair (benchmarks/NOTES.md, GPU 15).
template <class Rule>
constexpr bool is_zero_min = false;
template <>
constexpr bool is_zero_min<FloatRule<true>> = true;
template <typename T, class Box, class Rule, bool Labels, bool Global, bool Windowed, bool Packed>
constexpr bool kDenseKernel = std::is_same<T, float>::value &&
                              (std::is_same<Box, NoBox<float>>::value ||
                               std::is_same<Box, OrthoBox<float>>::value) &&
                              is_zero_min<Rule> && !Labels && !Global && !Windowed;

// Periodic boxes: the kernels load the bounds of every chunk of j atoms with the tile and try
// one image per chunk (tile_pairs).
template <class Box>
constexpr bool kPeriodic = !std::is_same<Box, NoBox<float>>::value && !std::is_same<Box, NoBox<double>>::value;
// launch statistics: chunks with one image, with one index, all; pairs the float filter
// settled in double
constexpr int kStats = 4;

// The triclinic box without and with extra images as one-parameter templates (the lists of
// explicit instantiations take box templates).
template <typename T>
using TriclinicNoImages = TriclinicBox<T, false>;
template <typename T>
using TriclinicImages = TriclinicBox<T, true>;
template <typename T>
using TriclinicSlab = TriclinicBox<T, true, true>;

// CUDA's name and description of an error.
inline std::string error_text(cudaError_t e) {
    return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

// Throws OutOfMemory (a failed allocation) or CudaError, naming the call `what` and CUDA's
// error, unless e is cudaSuccess.
inline void check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();  // clear a non-sticky error so the engine stays usable
    const std::string msg = std::string("CUDA error in ") + what + ": " + error_text(e);
    if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
    throw CudaError(msg);
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
