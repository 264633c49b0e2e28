// CUDA pair-distance histogram kernels for one frame and all species pairs, and the
// per-device engine that feeds them.
//
// Design after CADISHI (../shared/papers/000_250f7fd1161c6543.txt, Sec. 3.2) and VMD's GPU
// RDF (002_a98ab72dc38a4aae.txt, Sec. 2.4):
//   * one host-to-device copy per frame carries the coordinates of every species (float4:
//     x, y, z and the exclusion label's bits); one launch covers every species pair;
//   * the pairs of every species pair are cut into tasks (an i tile of kThreads * kRows atoms
//     held in registers, a j range streamed through shared memory); one block per task;
//   * shared kernel: each block histograms into uint32 sub-histograms in shared memory (one
//     per group of warps, to spread the atomics) and adds them into the uint64 totals on the
//     device at its end. A task holds fewer than 2^32 pairs, so no bin can wrap. Histograms
//     wider than shared memory are done in several sweeps, each over one window of bins;
//   * global kernel: 64-bit atomics straight into the device totals, for very wide histograms;
//   * a species with itself is done once (j > i) and counted twice, plus the i == j pairs at
//     distance 0, as on the CPU;
//   * the distance and bin maths is geometry.hpp's, shared with the CPU kernel; built with
//     --fmad=false and IEEE sqrt, so that both give the same histogram bit for bit.
#include <cuda_runtime.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "fastrdf/cells.hpp"
#include "fastrdf/cuda.hpp"
#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"
#include "fastrdf/kernel_api.hpp"

namespace fastrdf {
namespace gpu {

namespace {

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
constexpr int kStats = 3;  // launch statistics: chunks with one image, with one index, all

// Sum over the copies of bin k of a window of w bins (stride: slots(window)), with the slot
// beyond the window folded into its last bin.
__device__ __forceinline__ unsigned long long copies_sum(const uint32_t* hist, int copies,
                                                         int stride, int k, int w) {
    unsigned long long s = 0;
    for (int c = 0; c < copies; ++c) s += hist[c * stride + k];
    if (k == w - 1)
        for (int c = 0; c < copies; ++c) s += hist[c * stride + w];
    return s;
}

// CPUs this process may run on (its affinity mask), at most cap.
std::size_t usable_cpus(std::size_t cap) {
    cpu_set_t set;
    std::size_t n = std::thread::hardware_concurrency();
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = static_cast<std::size_t>(CPU_COUNT(&set));
    return std::clamp<std::size_t>(n, 1, cap);
}

std::string error_text(cudaError_t e) {
    return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();  // clear a non-sticky error so the engine stays usable
    const std::string msg = std::string("CUDA error in ") + what + ": " + error_text(e);
    if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
    throw CudaError(msg);
}

// An allocation in device memory (Pinned = false) or page-locked host memory (Pinned = true)
// that grows and never shrinks; a failed device allocation says how much was asked for and
// how much the device has.
template <typename T, bool Pinned>
struct Buffer {
    T* ptr = nullptr;
    std::size_t n = 0;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { release(); }
    void release() {
        if (ptr) Pinned ? cudaFreeHost(ptr) : cudaFree(ptr);
        ptr = nullptr;
        n = 0;
    }
    // Returns true when (re)allocated (the contents are then undefined).
    bool reserve(std::size_t m, const char* what) {
        if (m <= n && ptr) return false;
        release();
        const std::size_t bytes = std::max<std::size_t>(m, 1) * sizeof(T);
        void* p = nullptr;
        const cudaError_t e = Pinned ? cudaMallocHost(&p, bytes) : cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            if (Pinned) check(e, what);
            std::size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            const std::string msg =
                std::string("CUDA device out of memory: could not allocate ") +
                std::to_string(bytes >> 20) + " MiB for " + what + " (" +
                std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                " MiB): " + error_text(e) +
                ". Use fewer bins or species pairs, or device='cpu'.";
            if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
            throw CudaError(msg);
        }
        ptr = static_cast<T*>(p);
        n = std::max<std::size_t>(m, 1);
        return true;
    }
};
template <typename T>
using DeviceArray = Buffer<T, false>;
template <typename T>
using PinnedArray = Buffer<T, true>;

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

// Bin rules: rule(r2, k) is true when the squared distance r2 is in range, and then k is its
// bin (k is some value in [0, nbins) otherwise, or garbage for NaN: never used).

// The CPU kernel's arithmetic: IEEE square root, numpy's correction near edges in double.
template <typename T>
struct ExactRule {
    Binning<T> bin;
    __device__ __forceinline__ bool operator()(T r2, int& k) const {
        constexpr bool kExact = std::is_same<T, double>::value;
        const T r = sqrt(r2);
        k = 0;
        if (!bin.in_range(r)) return false;
        const T f = bin.coordinate(r);
        k = bin.fast_bin_of(f);
        if (kExact && bin.near_edge(f, k)) k = bin.exact_bin(r);
        return true;
    }
};

// FloatRule, the default single-precision rule: fastrdf/float_rule.cuh.

// The same bins in float without the IEEE square root. The host lists, for the float bin
// function k(r2) = min(trunc((sqrt(r2) - rmin) * norm), nbins - 1) of the CPU kernel (which
// never decreases with r2), the smallest r2 of every bin (t2[k]) and the in-range limits.
// The kernel takes the hardware's approximate square root; a pair whose approximate bin
// coordinate lies farther than `delta` (a bound on the approximation's error) from an integer
// is in the same bin as with the exact root; the few others are settled by one comparison
// with t2. Same histogram as ExactRule<float>, bit for bit.
struct FastRule {
    float lo2, hi2;    // r2 in range iff lo2 <= r2 <= hi2
    float rmin, norm;  // as in Binning<float>
    float delta;       // > |approximate - exact bin coordinate|
    int nbins;
    const float* t2;   // nbins + 1: t2[0] = 0, t2[k] = smallest r2 of bin k, t2[nbins] = inf
    __device__ __forceinline__ bool operator()(float r2, int& k) const {
        k = 0;
        if (!(r2 >= lo2 && r2 <= hi2)) return false;  // NaN (padding) is out too
        float r;
        asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(r2));
        const float f = (r - rmin) * norm;
        const float t = f + 12582912.0f;  // 1.5 * 2^23: rounds f to an integer
        const float fr = t - 12582912.0f;
        k = __float_as_int(t) - 0x4B400000;  // that integer
        const float d = f - fr;
        if (fabsf(d) < delta) {
            k = min(max(k, 0), nbins);
            k = r2 >= __ldg(t2 + k) ? k : k - 1;
        } else {
            k = d < 0.f ? k - 1 : k;
        }
        k = min(k, nbins - 1);
        return true;
    }
};

// Adds 1 to the uint32 at shared-memory address addr when take is true: a predicated
// reduction, not a branch around an atomic (a branch costs BSSY, BRA and BSYNC per pair and
// makes the compiler reload constants after it: benchmarks/NOTES.md, GPU item 11).
__device__ __forceinline__ void shared_inc_if(uint32_t addr, bool take) {
    asm volatile(
        "{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %1, 0;\n\t@q red.shared.add.u32 [%0], 1;\n\t}"
        :
        : "r"(addr), "r"(static_cast<unsigned>(take))
        : "memory");
}

// Adds 1 to the uint32 at shared-memory address addr: no predicate, so no branch around it.
__device__ __forceinline__ void shared_inc(uint32_t addr) {
    asm volatile("red.shared.add.u32 [%0], 1;" : : "r"(addr) : "memory");
}

// Adds v to the uint32 at shared-memory address addr and returns the value it held before.
__device__ __forceinline__ uint32_t shared_fetch_add(uint32_t addr, uint32_t v) {
    uint32_t old;
    asm volatile("atom.shared.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(addr), "r"(v) : "memory");
    return old;
}

// Packed histograms: two 16-bit counters per 32-bit word of shared memory, so that a window
// twice as wide fits (100k bins in one sweep on Hopper). Bin rel of a window lives in word
// rel / 2, in its low half when rel is even and its high half when rel is odd. No half may
// wrap into its neighbour: the one increment that takes a half from 0x7FFF to 0x8000
// (atomics serialise, so exactly one thread sees 0x7FFF before its add) takes 0x8000 back
// out of the word and adds 0x8000 * mult to the 64-bit totals. A half then stays below
// 0x8000 plus the increments other threads make between that add and the subtraction that
// follows it in the same warp a few instructions later: far fewer than the 0x8000 more it
// would take to reach 0x10000. The subtraction cannot borrow either: only increments reach
// that half in between. Pairs that do not count increment a word of their lane beyond the
// histogram (`dummy`, never read) instead of branching around the atomic, which would cost
// a BSSY/BRA/BSYNC per pair (benchmarks/NOTES.md, GPU items 11-12).
// packed_add: inc (1 or 0x10000) into the word at addr, the dummy word when !take.
__device__ __forceinline__ void packed_add(uint32_t addr, uint32_t inc, bool take,
                                           unsigned long long* bin_total, unsigned mult) {
    const uint32_t old = shared_fetch_add(addr, inc);
    const uint32_t half_mask = inc * 0xFFFFu;        // 0x0000FFFF or 0xFFFF0000
    const bool full = take & (((old ^ 0x7FFF7FFFu) & half_mask) == 0u);  // was 0x7FFF
    if (__any_sync(0xFFFFFFFFu, full)) {  // rare; then the whole warp, without a branch
        asm volatile("red.shared.add.u32 [%0], %1;"
                     :
                     : "r"(addr), "r"(full ? 0u - inc * kPackedFlush : 0u)
                     : "memory");
        atomicAdd(bin_total, full ? static_cast<unsigned long long>(kPackedFlush) * mult : 0ull);
    }
}

// Bin rel of the window (words from base): word rel / 2, the half rel % 2.
__device__ __forceinline__ void packed_inc(uint32_t base, uint32_t dummy, unsigned rel, bool take,
                                           unsigned long long* bin_total, unsigned mult) {
    const uint32_t inc = 1u + (rel & 1u) * 0xFFFFu;  // 1 or 0x10000
    packed_add(take ? base + 2u * (rel & ~1u) : dummy, inc, take, bin_total, mult);
}

// Loads atom j of a tile (when valid) into jt[threadIdx.x] and, for periodic boxes, the
// bounds of each chunk of kChunk atoms into jbox[2 c] (lowest x, y, z) and jbox[2 c + 1]
// (highest): one warp per chunk, so the tile's size is a multiple of kChunk. A chunk with no
// valid atom gets empty bounds, but no caller reaches it.
template <class Box>
__device__ __forceinline__ void load_tile(float4* jt, float4* jbox, const float4* atoms, int j,
                                          bool valid) {
    const float inf = __int_as_float(0x7f800000);
    float4 v = make_float4(inf, inf, inf, 0.f);
    if (valid) {
        v = atoms[j];
        jt[threadIdx.x] = v;
    }
    if constexpr (kPeriodic<Box>) {
        float lx = v.x, ly = v.y, lz = v.z;
        float hx = valid ? v.x : -inf, hy = valid ? v.y : -inf, hz = valid ? v.z : -inf;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            lx = fminf(lx, __shfl_xor_sync(0xFFFFFFFFu, lx, o));
            ly = fminf(ly, __shfl_xor_sync(0xFFFFFFFFu, ly, o));
            lz = fminf(lz, __shfl_xor_sync(0xFFFFFFFFu, lz, o));
            hx = fmaxf(hx, __shfl_xor_sync(0xFFFFFFFFu, hx, o));
            hy = fmaxf(hy, __shfl_xor_sync(0xFFFFFFFFu, hy, o));
            hz = fmaxf(hz, __shfl_xor_sync(0xFFFFFFFFu, hz, o));
        }
        if ((threadIdx.x & 31) == 0) {
            const int c = static_cast<int>(threadIdx.x) / kChunk;
            jbox[2 * c] = make_float4(lx, ly, lz, 0.f);
            jbox[2 * c + 1] = make_float4(hx, hy, hz, 0.f);
        }
    }
}

// All pairs of this thread's i atoms with the j atoms in shared memory. Tri: same-species
// task on the diagonal, only j > i counts. Padding i atoms are NaN: never in range. Every
// pair is computed; exclusions (Tri, Labels) and the range only mask the increment.
//
// Periodic boxes go chunk by chunk (kChunk j atoms, bounds in jbox): each thread asks whether
// every displacement from its i atoms to the chunk's bounding box gets one image
// (common_image, geometry.hpp: the index functions are monotone, so the two extreme corners
// decide); when every lane of the warp can (padding rows count as able: their NaN pairs never
// count), the chunk's pairs take that shift and only reduce() per pair (norm() alone when
// every row's shift is 0), the same r2 bit for bit, else each pair its own image. With
// spatially sorted atoms (run()) most chunks can. Single-precision
// shared-memory kernels have a third way for chunks where the rows disagree on one index only
// (below: one index of a triclinic box, one axis of an orthorhombic one). chunks[0] counts
// the chunks that took one image, chunks[1] those that took one index, chunks[2] all chunks
// (per warp).
template <typename T, class Box, class Rule, bool Labels, bool Global, bool Windowed, bool Tri,
          bool Packed = false, int R = kRows, bool Dense = false>
__device__ __forceinline__ void tile_pairs(const float4 (&ai)[R], const int (&ii)[R],
                                           const float4* jt, const float4* jbox, int jb, int nj,
                                           const Box& box, const Rule& rule,
                                           unsigned long long* out, unsigned mult, uint32_t* mine,
                                           int lo, int w, uint32_t dummy, bool chunk_images,
                                           unsigned (&chunks)[3]) {
    uint32_t base = Global ? 0u : static_cast<uint32_t>(__cvta_generic_to_shared(mine));
    // raw(): one LEA from the biased bin to the counter's address (float_rule.cuh)
    // (packed: word u / 2 from base - 2 kBias, half u % 2, as kBias is even and lo = 0)
    constexpr bool kRaw = !Global && !Windowed && has_raw<Rule>::value;
    if constexpr (kRaw) base -= (Packed ? 2u : 4u) * Rule::kBias;  // modulo 2^32, as the sum is
    if (Packed) {
        // opaque to the compiler: kept in registers rather than recomputed after each
        // warp-uniform branch of packed_inc (S2R, MOV, LEA per pair otherwise)
        asm volatile("" : "+r"(base));
        asm volatile("" : "+r"(dummy));
    }
    // bins the pair (i = row r, j = jb + k) at squared distance r2
    auto count = [&](T r2, int k, int r, const float4& aj) {
        int b = 0;
        uint32_t u = 0;
        bool take;
        if constexpr (kRaw) take = rule.raw(r2, u);
        else take = rule(r2, b);
        if (Tri) take = take & (jb + k > ii[r]);
        if (Labels) take = take & (__float_as_int(aj.w) != __float_as_int(ai[r].w));
        if (Global) {
            if (take) atomicAdd(out + b, static_cast<unsigned long long>(mult));
        } else if constexpr (Packed && kRaw) {
            static_assert(!Dense || (!Tri && !Labels), "dense: nothing masked");
            const bool t = Dense || take;
            const uint32_t inc = 1u + (u & 1u) * 0xFFFFu;  // 1 or 0x10000
            // the totals of bin nbins (r == rmax) are those of bin nbins - 1; lanes that
            // do not count (r < rmin: u below the bias) point at bin 0, as they add 0
            const int bin = min(max(static_cast<int>(u - Rule::kBias), 0), w - 1);
            packed_add(t ? base + 2u * (u & ~1u) : dummy, inc, t, out + bin, mult);
        } else if (Packed) {
            const unsigned rel = static_cast<unsigned>(b - lo);
            const bool in_window = Windowed ? (take & (rel < static_cast<unsigned>(w))) : take;
            // lanes that do not count add 0 to the totals of the window's first bin
            packed_inc(base, dummy, rel, in_window, out + lo + (in_window ? rel : 0u), mult);
        } else if (Windowed) {
            const unsigned rel = static_cast<unsigned>(b - lo);
            shared_inc_if(base + 4u * rel, take & (rel < static_cast<unsigned>(w)));
        } else if constexpr (Dense) {
            static_assert(kRaw && !Tri && !Labels, "dense: raw bins, nothing masked");
            shared_inc(base + 4u * u);
        } else if constexpr (kRaw) {
            shared_inc_if(base + 4u * u, take);
        } else {
            shared_inc_if(base + 4u * static_cast<unsigned>(b), take);
        }
    };
    // every pair of j atoms [c0, c1) with the rows, r2 from r2_of(j atom, row)
    auto pairs_of = [&](int c0, int c1, auto r2_of) {
        for (int k = c0; k < c1; ++k) {
            const float4 aj = jt[k];
#pragma unroll
            for (int r = 0; r < R; ++r) count(r2_of(aj, r), k, r, aj);
        }
    };
    auto own_image = [&](const float4& aj, int r) {
        return pair_dist2(box, ai[r].x, ai[r].y, ai[r].z, aj.x, aj.y, aj.z);
    };
    if constexpr (!kPeriodic<Box>) {
        pairs_of(0, nj, own_image);
    } else {
        // (the special loops in single-precision shared-memory kernels only: each variant
        // costs compile time)
        constexpr bool kFloatShared = std::is_same<T, float>::value && !Global && !Windowed;
        constexpr bool kOneIndex = kFloatShared && is_triclinic<Box>;
        constexpr bool kAxes = kFloatShared && std::is_same<Box, OrthoBox<float>>::value;
        // (a zero shift saves nothing in the MDAnalysis-scaled form, which has no norm())
        constexpr bool kZero = kFloatShared && has_norm<Box>::value;
        for (int c0 = 0; c0 < nj; c0 += kChunk) {
            const int c1 = min(c0 + kChunk, nj);
            const float4 bl = jbox[2 * (c0 / kChunk)], bh = jbox[2 * (c0 / kChunk) + 1];
            T s[R][3];
            T nl[R][3];           // kOneIndex: each row's lowest indices over the chunk
            unsigned unsure = 0;  // kOneIndex: bit k when a row's index k takes two values
            unsigned axes = 7u;   // kAxes: bit c when every row takes one index along axis c
            bool one = chunk_images, wide = false;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const T dl[3] = {static_cast<T>(bl.x - ai[r].x), static_cast<T>(bl.y - ai[r].y),
                                 static_cast<T>(bl.z - ai[r].z)};
                const T dh[3] = {static_cast<T>(bh.x - ai[r].x), static_cast<T>(bh.y - ai[r].y),
                                 static_cast<T>(bh.z - ai[r].z)};
                const bool pad = ai[r].x != ai[r].x;
                if constexpr (kOneIndex) {
                    T nh[3];
                    box.index_bounds(dl, dh, nl[r], nh);
                    box.shift(nl[r], s[r]);
#pragma unroll
                    for (int k = 0; k < 3; ++k) {
                        const bool u = !(nl[r][k] == nh[k]) & !pad;
                        unsure |= static_cast<unsigned>(u) << k;
                        wide = wide | (u & !(nh[k] - nl[r][k] <= T(1)));
                    }
                } else if constexpr (kAxes) {
                    axes &= pad ? 7u : box.common_axes(dl, dh, s[r]);
                } else {
                    one = one & (box.common_image(dl, dh, s[r]) | pad);
                }
            }
            if constexpr (kOneIndex) one = one & (unsure == 0u);
            if constexpr (kAxes) one = one & (axes == 7u);
            ++chunks[2];
            // the pair of j atom aj and row r
            auto d_of = [&](const float4& aj, int r, T (&d)[3]) {
                d[0] = static_cast<T>(aj.x - ai[r].x);
                d[1] = static_cast<T>(aj.y - ai[r].y);
                d[2] = static_cast<T>(aj.z - ai[r].z);
            };
            if (__all_sync(0xFFFFFFFFu, one)) {
                ++chunks[0];
                if constexpr (kZero) {
                    bool zero = true;
#pragma unroll
                    for (int r = 0; r < R; ++r)  // (padding rows: any shift, their pairs never count)
                        zero = zero & ((ai[r].x != ai[r].x) |
                                       ((s[r][0] == T(0)) & (s[r][1] == T(0)) & (s[r][2] == T(0))));
                    if (__all_sync(0xFFFFFFFFu, zero)) {
                        // the shift 0 for every row: d - 0 is d, so norm(d), the loop of a
                        // frame without a box (plus the triclinic extra images)
                        pairs_of(c0, c1, [&](const float4& aj, int r) {
                            T d[3];
                            d_of(aj, r, d);
                            return box.norm(d[0], d[1], d[2]);
                        });
                        continue;
                    }
                }
                pairs_of(c0, c1, [&](const float4& aj, int r) {
                    T d[3];
                    d_of(aj, r, d);
                    return box.reduce(d[0], d[1], d[2], s[r]);
                });
                continue;
            }
            if constexpr (kAxes) {
                // Orthorhombic chunks whose rows disagree along one axis only: that axis takes
                // each pair's own image (OrthoBox::axis_reduced, dist2's arithmetic), the
                // other two the row's shift.
                unsigned warp_axes = 0;
#pragma unroll
                for (int c = 0; c < 3; ++c)
                    warp_axes |= static_cast<unsigned>(__all_sync(0xFFFFFFFFu, (axes >> c) & 1u)) << c;
                if (chunk_images && __popc(warp_axes) == 2) {
                    ++chunks[1];
                    auto along = [&](auto axis) {
                        constexpr int c = decltype(axis)::value;
                        pairs_of(c0, c1, [&](const float4& aj, int r) {
                            T d[3];
                            d_of(aj, r, d);
#pragma unroll
                            for (int q = 0; q < 3; ++q)
                                d[q] = q == c ? box.axis_reduced(q, d[q]) : d[q] - s[r][q];
                            return box.norm(d[0], d[1], d[2]);
                        });
                    };
                    if (!(warp_axes & 1u))
                        along(std::integral_constant<int, 0>{});
                    else if (!(warp_axes & 2u))
                        along(std::integral_constant<int, 1>{});
                    else
                        along(std::integral_constant<int, 2>{});
                    continue;
                }
            }
            if constexpr (kOneIndex) {
                // The rows disagree on one index k only (the same for the whole warp), and each
                // row's index k is one of two neighbours nl, nl + 1: a pair needs only index k
                // (Box::index_with, the same rounding as index()) to pick between the row's two
                // shifts, both made by shift() as dist2 would make them.
                unsigned warp_unsure = 0;
#pragma unroll
                for (int k = 0; k < 3; ++k)
                    warp_unsure |= static_cast<unsigned>(__any_sync(0xFFFFFFFFu, (unsure >> k) & 1u)) << k;
                if (chunk_images && __popc(warp_unsure) == 1 && !__any_sync(0xFFFFFFFFu, wide)) {
                    ++chunks[1];
                    const int k = __ffs(warp_unsure) - 1;
                    T c[3], nk[R], sh[R][3];
#pragma unroll
                    for (int q = 0; q < 3; ++q) c[q] = k == 0 ? box.f[0][q] : (k == 1 ? box.f[1][q] : box.f[2][q]);
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        nk[r] = k == 0 ? nl[r][0] : (k == 1 ? nl[r][1] : nl[r][2]);
                        T up[3];
#pragma unroll
                        for (int q = 0; q < 3; ++q) up[q] = q == k ? nl[r][q] + T(1) : nl[r][q];
                        box.shift(up, sh[r]);
                    }
                    pairs_of(c0, c1, [&](const float4& aj, int r) {
                        T d[3];
                        d_of(aj, r, d);
                        const bool hi = Box::index_with(c, d[0], d[1], d[2]) != nk[r];
                        const T t[3] = {hi ? sh[r][0] : s[r][0], hi ? sh[r][1] : s[r][1],
                                        hi ? sh[r][2] : s[r][2]};
                        return box.reduce(d[0], d[1], d[2], t);
                    });
                    continue;
                }
            }
            pairs_of(c0, c1, own_image);
        }
    }
}

// Adds a warp's chunk counts (tile_pairs) to the launch's statistics.
__device__ __forceinline__ void add_chunk_stats(unsigned long long* stats, const unsigned (&chunks)[3]) {
    if (stats && (threadIdx.x & 31) == 0 && chunks[2]) {
        atomicAdd(stats, static_cast<unsigned long long>(chunks[0]));
        atomicAdd(stats + 1, static_cast<unsigned long long>(chunks[1]));
        atomicAdd(stats + 2, static_cast<unsigned long long>(chunks[2]));
    }
}

// Threads: block size (kThreads; kWideThreads for the packed kernel and for 32-bit windows
// too wide for two blocks of kThreads per multiprocessor, so that one block still keeps 32
// warps busy).
template <typename T, class Box, class Rule, bool Labels, bool Global, bool Windowed,
          bool Packed = false, int Threads = kThreads>
__global__ void __launch_bounds__(Threads)
    histogram_kernel(const KernelArgs a, const Box box, const Rule rule) {
    extern __shared__ __align__(16) unsigned char smem[];
    float4* jt = reinterpret_cast<float4*>(smem);
    float4* jbox = jt + Threads;
    uint32_t* hist = reinterpret_cast<uint32_t*>(smem + tile_bytes(Threads));

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

    for (int jb = t.j0; jb < t.j1; jb += Threads) {
        __syncthreads();
        const int j = jb + threadIdx.x;
        load_tile<Box>(jt, jbox, a.atoms, j, j < t.j1);
        __syncthreads();
        const int nj = min(Threads, t.j1 - jb);
        if (tri)
            tile_pairs<T, Box, Rule, Labels, Global, Windowed, true, Packed>(
                ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, lo, w, dummy, one_image, chunks);
        else if (dense)
            tile_pairs<T, Box, Rule, Labels, Global, Windowed, false, Packed, kRows, kDense>(
                ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, lo, w, dummy, one_image, chunks);
        else
            tile_pairs<T, Box, Rule, Labels, Global, Windowed, false, Packed>(
                ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, lo, w, dummy, one_image, chunks);
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

// ---- Cell lists (cells.hpp) --------------------------------------------------------------
//
// Per frame, on the device: every atom gets its cell (assign_cells, in double, as on the
// CPU), each species block is counting-sorted by cell (count, scan_cells, scatter_cells; the
// order inside a cell depends on the atomics, which cannot change a count: the distance of
// (i, j) equals that of (j, i) bit for bit), then cell_kernel histograms. A block of
// cell_kernel takes one species pair, one column of cells and one neighbour column; it walks
// its column's atoms in chunks of kCellThreads (one per thread) and streams, for each chunk,
// the strip of neighbour cells along axis 2 that covers every cell of the chunk. Each
// unordered pair is looked at once: for a species with itself only neighbour columns of
// higher rank, and in its own column only j > i.

constexpr int kCellThreads = 128;
constexpr int kScanThreads = 1024;

struct CellTask {
    int pair, col, ncol, part;
};

struct CellFrame {
    int n[3];
    int k;
    int periodic;
    int n_species;
    int n_cells;
    double f[3][3];       // periodic: fractional coordinate d = f[d] . r
    double lo[3], side[3];  // no box: cell d = (r[d] - lo[d]) / side[d]
};

__global__ void assign_cells(const float4* __restrict__ atoms, int n, const int* __restrict__ offsets,
                             const int* __restrict__ rank, const CellFrame g, int* __restrict__ cell_of,
                             int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float4 a = atoms[i];
    const double r[3] = {a.x, a.y, a.z};
    int c[3];
#pragma unroll
    for (int d = 0; d < 3; ++d) {
        if (g.periodic) {
            double s = g.f[d][0] * r[0] + g.f[d][1] * r[1] + g.f[d][2] * r[2];
            s -= floor(s);
            c[d] = static_cast<int>(s * g.n[d]);
        } else {
            c[d] = static_cast<int>((r[d] - g.lo[d]) / g.side[d]);
        }
        c[d] = min(max(c[d], 0), g.n[d] - 1);
    }
    const int cell = rank[c[0] * g.n[1] + c[1]] * g.n[2] + c[2];
    int lo = 0, hi = g.n_species;  // species: offsets[s] <= i < offsets[s + 1]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (offsets[mid] <= i) lo = mid; else hi = mid;
    }
    cell_of[i] = cell;
    atomicAdd(count + lo * (g.n_cells + 1) + cell + 1, 1);
}

// One block per species: count[s][0..n_cells] (count[s][c + 1] atoms in cell c) becomes the
// first sorted index of every cell, offsets[s] + the atoms of the cells before; fill = start.
__global__ void __launch_bounds__(kScanThreads)
    scan_cells(int* __restrict__ start, int* __restrict__ fill, const int* __restrict__ offsets,
               int n_cells) {
    __shared__ int sums[kScanThreads];
    const int len = n_cells + 1;
    int* seg = start + blockIdx.x * len;
    int* fseg = fill + blockIdx.x * len;
    const int per = (len + kScanThreads - 1) / kScanThreads;
    const int b = threadIdx.x * per, e = min(b + per, len);
    int local = 0;
    for (int c = b; c < e; ++c) local += seg[c];
    sums[threadIdx.x] = local;
    __syncthreads();
    for (int off = 1; off < kScanThreads; off *= 2) {
        const int v = threadIdx.x >= off ? sums[threadIdx.x - off] : 0;
        __syncthreads();
        sums[threadIdx.x] += v;
        __syncthreads();
    }
    int run = offsets[blockIdx.x] + sums[threadIdx.x] - local;
    for (int c = b; c < e; ++c) {
        run += seg[c];
        seg[c] = run;
        fseg[c] = run;
    }
}

__global__ void scatter_cells(const float4* __restrict__ atoms, int n, const int* __restrict__ offsets,
                              int n_species, int n_cells, const int* __restrict__ cell_of, int n2,
                              int* __restrict__ fill, float4* __restrict__ sorted, int* __restrict__ zsorted) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int lo = 0, hi = n_species;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (offsets[mid] <= i) lo = mid; else hi = mid;
    }
    const int cell = cell_of[i];
    const int pos = atomicAdd(fill + lo * (n_cells + 1) + cell, 1);
    sorted[pos] = atoms[i];
    zsorted[pos] = cell % n2;
}

struct CellKernelArgs {
    const float4* atoms;  // sorted by cell within each species block
    const int* zcell;     // axis-2 cell of every sorted atom
    const int* start;     // n_species * (n_cells + 1)
    const CellTask* tasks;
    const int* pairs;     // 2 * n_pairs species
    unsigned long long* out;
    int nbins, copies, parts;
    int n2, k, periodic, n_cells;
    int chunk_images;            // as in KernelArgs
    unsigned long long* stats;   // as in KernelArgs
};

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
    extern __shared__ __align__(16) unsigned char smem[];
    float4* jt = reinterpret_cast<float4*>(smem);
    float4* jbox = jt + kCellThreads;
    uint32_t* hist = reinterpret_cast<uint32_t*>(smem + tile_bytes(kCellThreads));

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
                            a.chunk_images, chunks);
                    else
                        tile_pairs<T, Box, Rule, Labels, Global, false, false, false, 1>(
                            ai, ii, jt, jbox, jb, nj, box, rule, out, mult, mine, 0, a.nbins, 0u,
                            a.chunk_images, chunks);
                }
            }
        }
    }
    add_chunk_stats(a.stats, chunks);
    flush_cells<Global>(hist, a.copies, a.nbins, out, mult);
}

// Whether the cell kernel is expected to beat the all-pairs kernel on a GPU: the pairs it looks
// at (with the chunks' longer strips), plus sorting and four more launches (~3 10^7 pair-times,
// measured: benchmarks/NOTES.md "GPU cell lists").
bool gpu_cells_pay(const CellPlan& pl) {
    return pl.n[0] * pl.n[1] * pl.n[2] > 1 &&
           1.5 * pl.cell_pairs + 50.0 * pl.atoms + 3e7 < pl.allpairs_pairs;
}

bool same_vector(const std::vector<int64_t>& v, const int64_t* p, std::size_t n) {
    return v.size() == n && std::equal(v.begin(), v.end(), p);
}

}  // namespace

// ------------------------------------------------------------------------------------------

int device_count(std::string* why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) *why = error_text(e);
        return 0;
    }
    if (n == 0 && why) *why = "no CUDA device found";
    return n;
}

DeviceInfo device_info(int device) {
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    DeviceInfo d;
    d.index = device;
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.total_memory = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    d.shared_per_block_optin = prop.sharedMemPerBlockOptin;
    d.shared_per_multiprocessor = prop.sharedMemPerMultiprocessor;
    d.l2_bytes = prop.l2CacheSize;
    return d;
}

int runtime_version() {
    int v = 0;
    cudaRuntimeGetVersion(&v);
    return v;
}

int driver_version() {
    int v = 0;
    cudaDriverGetVersion(&v);
    return v;
}

namespace {

// The value that the environment variable `name` selects among `choices` (name, value), or
// `automatic` when it is unset, empty or "auto"; anything else is a ValueError naming it.
int env_choice(const char* name, std::initializer_list<std::pair<const char*, int>> choices,
               int automatic) {
    const char* env = std::getenv(name);
    if (!env) return automatic;
    const std::string v(env);
    if (v.empty() || v == "auto") return automatic;
    std::string names;
    for (const auto& c : choices) {
        if (v == c.first) return c.second;
        names += std::string(c.first) + ", ";
    }
    throw std::invalid_argument(std::string(name) + ": '" + v + "' is not one of " + names +
                                "auto (unset it for auto)");
}

// Spatial order for the periodic all-pairs kernels: each species block of `in` counting-sorted
// into `out` by the Morton (Z-order) code of a grid of 2^b cells per axis over the frame's
// bounds [lo, hi], about two atoms per cell (Morton keeps a run of consecutive cells compact in
// all three axes, unlike row-major order: Al-Kharusi & Walker,
// ../shared/papers/004_71a4f60c206d7d7d.txt). A chunk of kChunk consecutive j atoms then spans
// a few cells, so one image usually serves a thread for all of it (tile_pairs). The histogram
// does not depend on the order: the distance of (i, j) is that of (j, i) bit for bit, and the
// labels travel with the atoms (w). run() sorts from a copy of the packed frame (staging)
// back into the pinned buffer: one more pass over the frame, for sorted frames only.
uint32_t spread_bits3(uint32_t v) {  // bits 0..9 of v to bits 0, 3, 6, ...
    v &= 0x3FFu;
    v = (v | (v << 16)) & 0x030000FFu;
    v = (v | (v << 8)) & 0x0300F00Fu;
    v = (v | (v << 4)) & 0x030C30C3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}

void sort_spatially(const float4* in, float4* out, const int64_t* offsets, int n_species,
                    const float lo[3], const float hi[3], std::vector<uint32_t>& key,
                    std::vector<uint32_t>& count) {
    for (int sp = 0; sp < n_species; ++sp) {
        const int64_t o0 = offsets[sp], o1 = offsets[sp + 1], n = o1 - o0;
        if (n <= kChunk) {
            std::copy(in + o0, in + o1, out + o0);
            continue;
        }
        const int b = std::clamp(static_cast<int>(std::lround(std::log2(std::cbrt(n / 2.0)))), 1, 7);
        const uint32_t g = 1u << b;
        float scale[3];
        for (int d = 0; d < 3; ++d) {
            const float ext = hi[d] - lo[d];
            scale[d] = ext > 1e-30f ? static_cast<float>(g) / ext : 0.f;  // finite
        }
        auto cell = [&](float x, int d) {
            const float c = (x - lo[d]) * scale[d];  // in [0, g]; g itself for x == hi
            return std::min(static_cast<uint32_t>(std::max(c, 0.f)), g - 1);
        };
        key.resize(static_cast<std::size_t>(n));
        count.assign((std::size_t(1) << (3 * b)) + 1, 0u);
        for (int64_t i = 0; i < n; ++i) {
            const float4 v = in[o0 + i];
            const uint32_t k = spread_bits3(cell(v.x, 0)) | (spread_bits3(cell(v.y, 1)) << 1) |
                               (spread_bits3(cell(v.z, 2)) << 2);
            key[i] = k;
            ++count[k + 1];
        }
        for (std::size_t c = 1; c < count.size(); ++c) count[c] += count[c - 1];
        for (int64_t i = 0; i < n; ++i) out[o0 + count[key[i]]++] = in[o0 + i];
    }
}

}  // namespace

struct Histogrammer::Impl {
    int device = 0;
    KernelChoice choice = KernelChoice::kAuto;
    int max_window_bins = 0;
    int forced_threads = 0;  // FASTRDF_CUDA_BLOCK_THREADS: 0 (auto), kThreads or kWideThreads
    // FASTRDF_CUDA_COMMON_IMAGE: kImageAuto (sort large periodic all-pairs frames spatially,
    // one image per chunk where it holds), kImageAlways (sort every periodic all-pairs frame:
    // tests), kImageOff (neither: to measure what they bring)
    int common_image = kImageAuto;
    double plan_pairs = 0;  // pairs of the problem plan() last built its tasks for
    std::vector<float4> staging;   // the packed frame before its spatial sort
    std::vector<uint32_t> sort_key, sort_count;
    DeviceArray<unsigned long long> dev_stats;  // [chunks with one image, with one index, all]
    bool exact_only = true;  // never use FastRule (the default: it measured slower)
    DeviceInfo info;
    cudaStream_t compute = nullptr, copy = nullptr;
    cudaEvent_t copy_done[2] = {nullptr, nullptr}, kernel_done[2] = {nullptr, nullptr};
    int slot = 0;

    // frame slots: float4 atoms followed by the triclinic images (precision T)
    PinnedArray<unsigned char> host_slot[2];
    DeviceArray<unsigned char> dev_slot[2];
    DeviceArray<unsigned long long> dev_out;
    PinnedArray<unsigned long long> host_out;
    DeviceArray<double> dev_edges_d;
    DeviceArray<float> dev_edges_f;
    std::vector<double> edges;   // what dev_edges_* hold
    std::vector<float> edges_f;  // the same in float (host)
    DeviceArray<Task> dev_tasks;
    std::vector<int64_t> task_offsets, task_pairs;  // what dev_tasks was built for
    int task_nbins = -1;
    long long n_tasks = 0;
    int out_pairs = 0, out_nbins = 0;
    bool pending = false;
    LaunchInfo launch;
    LaunchInfo allpairs_launch;  // plan()'s launch shape, kept while frames run on cells

    // cell lists
    int method = kMethodAuto, cell_k = 1, cell_order = kOrderRowMajor;
    std::size_t pack_threads = usable_cpus(8);  // threads that pack large frames
    DeviceArray<int> dev_offsets32, dev_pairs32, dev_rank, dev_cell_of, dev_start, dev_fill, dev_zcell;
    DeviceArray<float4> dev_sorted;
    DeviceArray<CellTask> dev_cell_tasks;
    std::vector<int64_t> cell_key;  // what the cell tables were built for
    long long n_cell_tasks = 0;
    int cell_parts = 1;

    Impl(int dev, KernelChoice k, int mw, bool exact, int meth, int ck, int order)
        : device(dev), choice(k), max_window_bins(mw), exact_only(exact), method(meth), cell_k(ck),
          cell_order(order) {
        std::string why;
        const int n = device_count(&why);
        if (n == 0) throw CudaError("no usable CUDA device: " + why);
        if (dev < 0 || dev >= n)
            throw std::invalid_argument("device: CUDA device " + std::to_string(dev) +
                                        " does not exist (this machine has " + std::to_string(n) + ")");
        check(cudaSetDevice(device), "cudaSetDevice");
        info = device_info(device);
        forced_threads = env_choice("FASTRDF_CUDA_BLOCK_THREADS", {{"256", kThreads}, {"1024", kWideThreads}}, 0);
        common_image = env_choice("FASTRDF_CUDA_COMMON_IMAGE", {{"always", kImageAlways}, {"off", kImageOff}},
                                  kImageAuto);
        dev_stats.reserve(kStats, "the launch statistics");
        check(cudaMemset(dev_stats.ptr, 0, kStats * sizeof(unsigned long long)), "cudaMemset");
        check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate");
        check(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), "cudaStreamCreate");
        for (int s = 0; s < 2; ++s) {
            check(cudaEventCreateWithFlags(&copy_done[s], cudaEventDisableTiming), "cudaEventCreate");
            check(cudaEventCreateWithFlags(&kernel_done[s], cudaEventDisableTiming), "cudaEventCreate");
        }
    }

    ~Impl() {
        cudaSetDevice(device);
        if (compute) cudaStreamSynchronize(compute);
        if (copy) cudaStreamSynchronize(copy);
        for (int s = 0; s < 2; ++s) {
            if (copy_done[s]) cudaEventDestroy(copy_done[s]);
            if (kernel_done[s]) cudaEventDestroy(kernel_done[s]);
        }
        if (compute) cudaStreamDestroy(compute);
        if (copy) cudaStreamDestroy(copy);
    }

    // Largest window of bins one block of `threads` can hold in shared memory: 32-bit
    // counters (slots(window) of them), or (packed) two 16-bit counters per word.
    int window_cap(int threads, bool packed = false) const {
        long long cap = (static_cast<long long>(info.shared_per_block_optin) - tile_bytes(threads)) / 4;
        cap = packed ? 2 * (cap - kPackedDummies) - 2  // inverse of packed_words
                     : cap - 1;                      // inverse of slots
        if (max_window_bins > 0) cap = std::min<long long>(cap, max_window_bins);
        return static_cast<int>(std::max<long long>(cap, 1));
    }

    // Sub-histograms per block of `threads` for a 32-bit window: up to one per warp, within
    // kCopyBudgetWords (blocks of kThreads) or the block's shared memory (kWideThreads: one
    // block per multiprocessor, which measured faster than two, benchmarks/NOTES.md item 13).
    int window_copies(int window, int threads) const {
        const int budget = threads == kWideThreads
                               ? static_cast<int>((info.shared_per_block_optin - tile_bytes(threads)) / 4)
                               : kCopyBudgetWords;
        int copies = std::clamp(budget / slots(window), 1, threads / 32);
        while (copies > 1 && static_cast<std::size_t>(copies) * slots(window) * 4 + tile_bytes(threads) >
                                 info.shared_per_block_optin)
            --copies;
        return copies;
    }

    void plan(const FrameProblem& p) {
        const bool same_tasks = task_nbins == p.nbins &&
                                same_vector(task_offsets, p.offsets, p.n_species + 1) &&
                                task_pairs.size() == static_cast<std::size_t>(2 * p.n_pairs) &&
                                std::equal(task_pairs.begin(), task_pairs.end(), p.pairs);
        if (same_tasks) {
            launch = allpairs_launch;
            return;
        }

        // pairs of this problem (to size the blocks and the tasks)
        double total = 0;
        for (int q = 0; q < p.n_pairs; ++q) {
            const int a = p.pairs[2 * q], b = p.pairs[2 * q + 1];
            const double na = double(p.offsets[a + 1] - p.offsets[a]);
            const double nb = double(p.offsets[b + 1] - p.offsets[b]);
            total += a == b ? na * (na - 1) / 2 : na * nb;
        }
        plan_pairs = total;
        // launch shape. auto: 32-bit shared histograms while two blocks of kThreads fit on a
        // multiprocessor or one window of kWideThreads holds every bin (~54k bins on Hopper;
        // block size below); else packed 16-bit ones (a window twice as wide, kWideThreads) in up to kMaxSharedSweeps sweeps;
        // else 64-bit global atomics. Measured on an H100 (benchmarks/NOTES.md, GPU items 12
        // and 13), no box, bapps at 10k / 20k / 40k / 100k bins: 32-bit in blocks of kThreads
        // 1023 / 873 / 534 / 281 (two sweeps); in one block of kWideThreads per
        // multiprocessor 1058 / 1060 / 1060 / -; packed 608 / 601 / 660 / 753.
        const int cap = window_cap(kThreads);
        const int sweeps = (p.nbins + cap - 1) / cap;
        const int wide_cap = window_cap(kWideThreads);
        const int pcap = window_cap(kPackedThreads, true);
        const int psweeps = (p.nbins + pcap - 1) / pcap;
        const std::size_t block32 = std::size_t(tile_bytes(kThreads)) + std::size_t(slots(p.nbins)) * 4 + 1024;
        const std::size_t blocks32 = info.shared_per_multiprocessor / block32;  // of kThreads
        const bool two_blocks = blocks32 >= 2;
        const bool wide_fits = p.nbins <= wide_cap;
        const bool auto_ = choice == KernelChoice::kAuto;
        const bool packed = choice == KernelChoice::kPacked ||
                            (auto_ && !two_blocks && !wide_fits && psweeps <= kMaxSharedSweeps);
        const bool global = choice == KernelChoice::kGlobal ||
                            (auto_ && !two_blocks && !wide_fits && psweeps > kMaxSharedSweeps);
        launch = LaunchInfo{};
        if (global) {
            launch.kernel = "global";
            launch.threads = kThreads;
            launch.sweeps = 1;
            launch.window = p.nbins;
            launch.copies = 0;
        } else if (packed) {
            launch.kernel = "packed";
            launch.threads = kPackedThreads;
            launch.sweeps = psweeps;
            launch.window = (p.nbins + psweeps - 1) / psweeps;
            launch.copies = 1;
        } else {
            launch.kernel = "shared";
            // One block of kWideThreads per multiprocessor, its shared memory filled with
            // sub-histograms (window_copies), when the window fits and either at most two
            // blocks of kThreads (16 warps) would fit or the problem has pairs enough for
            // many of its larger tiles (>= 8 per multiprocessor; smaller problems keep
            // kThreads, whose tiles spread over more multiprocessors). H100, 1M x 1M, bapps
            // kThreads -> kWideThreads: no box 1009 / 1023 / 873 / 660 (packed) -> 1058 /
            // 1058 / 1060 / 1060 at 1k / 10k / 20k / 40k bins; orthorhombic 668 -> 692,
            // triclinic 419 -> 433 at 10k. The environment variable FASTRDF_CUDA_BLOCK_THREADS
            // (256 or 1024) forces a block size for one-sweep windows, to measure the choice
            // (benchmarks/NOTES.md, GPU item 13).
            const double wide_tile = double(kWideThreads) * kRows * kWideThreads * kRows;
            const bool many_pairs = total >= 8.0 * info.multiprocessors * wide_tile;
            int threads =
                (sweeps == 1 && wide_fits && (blocks32 <= 2 || many_pairs)) ? kWideThreads : kThreads;
            if (sweeps == 1 && forced_threads > 0 && p.nbins <= window_cap(forced_threads))
                threads = forced_threads;
            launch.threads = threads;
            launch.sweeps = threads == kThreads ? sweeps : 1;
            launch.window = (p.nbins + launch.sweeps - 1) / launch.sweeps;
            launch.copies = window_copies(launch.window, threads);
        }

        // tasks: i tiles of threads * kRows atoms, j ranges long enough to amortise a block's
        // set-up (at least 256 pairs per bin of its window, which it zeroes and adds to the
        // totals) and short enough to give every multiprocessor many blocks (16: the last
        // wave's idle tail stays small)
        const int threads = launch.threads;
        const int tile_i = threads * kRows;
        const double target_blocks = 16.0 * info.multiprocessors;
        const long long max_tj = (1LL << 31) / tile_i;  // < 2^32 pairs per task: no uint32 wrap
        long long tj = static_cast<long long>(total / (tile_i * target_blocks));
        const long long flushed = launch.kernel == "global" ? 0 : launch.window;
        tj = std::max<long long>(tj, (256LL * flushed + tile_i - 1) / tile_i);
        tj = std::clamp<long long>((tj + threads - 1) / threads * threads, 2 * threads,
                                   max_tj / threads * threads);
        std::vector<Task> tasks;
        for (int q = 0; q < p.n_pairs; ++q) {
            const int a = p.pairs[2 * q], b = p.pairs[2 * q + 1];
            const int64_t a0 = p.offsets[a], a1 = p.offsets[a + 1];
            const int64_t b0 = p.offsets[b], b1 = p.offsets[b + 1];
            for (int64_t i0 = a0; i0 < a1; i0 += tile_i) {
                const int64_t i1 = std::min<int64_t>(i0 + tile_i, a1);
                const int64_t js = a == b ? i0 : b0;
                // ranges of equal length (<= tj), not tj and a short remainder
                const int64_t parts = std::max<int64_t>((b1 - js + tj - 1) / tj, 1);
                const int64_t step = ((b1 - js + parts - 1) / parts + threads - 1) / threads * threads;
                for (int64_t j0 = js; j0 < b1; j0 += step) {
                    const int64_t j1 = std::min<int64_t>(j0 + step, b1);
                    int flags = 0;
                    if (a == b) flags = kTwice | (j0 < i1 ? kTriangle : 0);
                    if (a == b && j1 <= i0 + 1) continue;  // no j > i in range
                    tasks.push_back(Task{q, int(i0), int(i1), int(j0), int(j1), flags});
                }
            }
        }
        n_tasks = static_cast<long long>(tasks.size());
        launch.tasks = n_tasks;
        if (n_tasks > 0x7fffffffLL) throw std::invalid_argument("problem too large for one launch");
        check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
        dev_tasks.reserve(tasks.size(), "the task list");
        if (!tasks.empty())
            check(cudaMemcpy(dev_tasks.ptr, tasks.data(), tasks.size() * sizeof(Task),
                             cudaMemcpyHostToDevice),
                  "cudaMemcpy(tasks)");
        task_offsets.assign(p.offsets, p.offsets + p.n_species + 1);
        task_pairs.assign(p.pairs, p.pairs + 2 * p.n_pairs);
        task_nbins = p.nbins;
        launch.method = "allpairs";
        allpairs_launch = launch;
    }

    // Static tables of the cell kernel (column ranks, task list, species), rebuilt when the
    // grid's shape or the species change; and the launch shape.
    void plan_cell_tables(const FrameProblem& p, const CellPlan& pl) {
        std::vector<int64_t> key = {pl.n[0], pl.n[1], pl.n[2], pl.k, pl.order, pl.periodic ? 1 : 0,
                                    p.nbins};
        key.insert(key.end(), p.offsets, p.offsets + p.n_species + 1);
        key.insert(key.end(), p.pairs, p.pairs + 2 * p.n_pairs);
        const int64_t n_cols = static_cast<int64_t>(pl.n[0]) * pl.n[1];
        const int64_t n_cells = n_cols * pl.n[2];
        if (n_cells + 1 > 0x7fffffffLL / std::max(1, p.n_species))
            throw std::invalid_argument("cell lists: too many cells for one frame");

        launch = LaunchInfo{};
        launch.method = "cells";
        launch.threads = kCellThreads;
        launch.cells[0] = pl.n[0];
        launch.cells[1] = pl.n[1];
        launch.cells[2] = pl.n[2];
        launch.cell_k = pl.k;
        const std::size_t jt_bytes = tile_bytes(kCellThreads);
        const bool fits = static_cast<std::size_t>(slots(p.nbins)) * 4 + jt_bytes <= info.shared_per_block_optin &&
                          (max_window_bins <= 0 || p.nbins <= max_window_bins);
        if (choice == KernelChoice::kGlobal || !fits) {
            launch.kernel = "global";
            launch.copies = 0;
        } else {
            launch.kernel = "shared";
            launch.copies = std::clamp(kCopyBudgetWords / slots(p.nbins), 1, kCellThreads / 32);
            while (launch.copies > 1 &&
                   static_cast<std::size_t>(launch.copies) * slots(p.nbins) * 4 + jt_bytes > info.shared_per_block_optin)
                --launch.copies;
        }
        launch.sweeps = 1;
        launch.window = p.nbins;

        if (key == cell_key) {
            launch.tasks = n_cell_tasks;
            return;
        }
        check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
        const std::vector<int32_t> rank = column_ranks(pl.n[0], pl.n[1], pl.order);
        std::vector<int32_t> nstart, nbr;
        column_neighbours(pl.n[0], pl.n[1], pl.k, pl.periodic, rank, nstart, nbr);
        long long base = 0;
        for (int q = 0; q < p.n_pairs; ++q)
            for (int64_t c = 0; c < n_cols; ++c)
                for (int32_t m = nstart[c]; m < nstart[c + 1]; ++m)
                    base += !(p.pairs[2 * q] == p.pairs[2 * q + 1] && nbr[m] < c);
        // enough blocks to fill the device: split each column's chunks among `parts` blocks
        cell_parts = static_cast<int>(std::clamp<long long>((16LL * info.multiprocessors + base - 1) /
                                                                 std::max(1LL, base), 1, 64));
        std::vector<CellTask> tasks;
        tasks.reserve(static_cast<std::size_t>(base) * cell_parts);
        for (int q = 0; q < p.n_pairs; ++q)
            for (int64_t c = 0; c < n_cols; ++c)
                for (int32_t m = nstart[c]; m < nstart[c + 1]; ++m) {
                    if (p.pairs[2 * q] == p.pairs[2 * q + 1] && nbr[m] < c) continue;
                    for (int part = 0; part < cell_parts; ++part)
                        tasks.push_back(CellTask{q, static_cast<int>(c), nbr[m], part});
                }
        if (tasks.size() > 0x7fffffffULL) throw std::invalid_argument("cell lists: too many tasks");
        n_cell_tasks = static_cast<long long>(tasks.size());
        launch.tasks = n_cell_tasks;
        std::vector<int> off32(p.offsets, p.offsets + p.n_species + 1);
        std::vector<int> pairs32(p.pairs, p.pairs + 2 * p.n_pairs);
        auto upload = [](auto& arr, const auto& v, const char* what) {
            arr.reserve(v.size(), what);
            if (!v.empty())
                check(cudaMemcpy(arr.ptr, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice), what);
        };
        upload(dev_cell_tasks, tasks, "the cell task list");
        upload(dev_rank, rank, "the cell column ranks");
        upload(dev_offsets32, off32, "the species offsets");
        upload(dev_pairs32, pairs32, "the species pairs");
        const std::size_t n_atoms = static_cast<std::size_t>(p.offsets[p.n_species]);
        dev_cell_of.reserve(n_atoms, "the cell of every atom");
        dev_zcell.reserve(n_atoms, "the cell of every atom");
        dev_sorted.reserve(n_atoms, "the sorted coordinates");
        dev_start.reserve(static_cast<std::size_t>(p.n_species) * (n_cells + 1), "the cell starts");
        dev_fill.reserve(static_cast<std::size_t>(p.n_species) * (n_cells + 1), "the cell starts");
        cell_key = key;
    }

    template <typename T, class Box, class Rule>
    void launch_cells(const CellKernelArgs& a, const Box& box, const Rule& rule, bool labels) {
        const bool global = launch.kernel == "global";
        const std::size_t smem = tile_bytes(kCellThreads) +
                                 (global ? 0 : std::size_t(launch.copies) * slots(a.nbins) * 4);
        auto go = [&](auto kernel) {
            if (smem > 48 * 1024)
                check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)),
                      "cudaFuncSetAttribute");
            kernel<<<static_cast<unsigned>(n_cell_tasks), kCellThreads, smem, compute>>>(a, box, rule);
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

    // Sorts the frame in dev atoms into cells (on the compute stream) and fills a.
    void sort_into_cells(const FrameProblem& p, const CellPlan& pl, const float4* atoms, int n,
                         CellKernelArgs& a) {
        CellFrame g{};
        for (int d = 0; d < 3; ++d) {
            g.n[d] = pl.n[d];
            g.lo[d] = pl.lo[d];
            g.side[d] = pl.side[d];
        }
        g.k = pl.k;
        g.periodic = pl.periodic;
        g.n_species = p.n_species;
        g.n_cells = pl.n[0] * pl.n[1] * pl.n[2];
        if (pl.periodic)
            for (int d = 0; d < 3; ++d)
                for (int c = 0; c < 3; ++c)
                    g.f[d][c] = p.box_kind == kTriclinic ? p.reciprocal[3 * d + c]
                                                         : (c == d ? 1.0 / p.ortho[d] : 0.0);
        const std::size_t len = static_cast<std::size_t>(p.n_species) * (g.n_cells + 1);
        check(cudaMemsetAsync(dev_start.ptr, 0, len * sizeof(int), compute), "cudaMemsetAsync");
        const int blocks = (n + 255) / 256;
        if (n > 0) {
            assign_cells<<<blocks, 256, 0, compute>>>(atoms, n, dev_offsets32.ptr, dev_rank.ptr, g,
                                                      dev_cell_of.ptr, dev_start.ptr);
            check(cudaGetLastError(), "the cell assignment kernel");
        }
        scan_cells<<<p.n_species, kScanThreads, 0, compute>>>(dev_start.ptr, dev_fill.ptr,
                                                              dev_offsets32.ptr, g.n_cells);
        check(cudaGetLastError(), "the cell scan kernel");
        if (n > 0) {
            scatter_cells<<<blocks, 256, 0, compute>>>(atoms, n, dev_offsets32.ptr, p.n_species,
                                                       g.n_cells, dev_cell_of.ptr, g.n[2], dev_fill.ptr,
                                                       dev_sorted.ptr, dev_zcell.ptr);
            check(cudaGetLastError(), "the cell scatter kernel");
        }
        a.atoms = dev_sorted.ptr;
        a.zcell = dev_zcell.ptr;
        a.start = dev_start.ptr;
        a.tasks = dev_cell_tasks.ptr;
        a.pairs = dev_pairs32.ptr;
        a.out = dev_out.ptr;
        a.nbins = p.nbins;
        a.copies = std::max(launch.copies, 1);
        a.parts = cell_parts;
        a.n2 = g.n[2];
        a.k = g.k;
        a.periodic = g.periodic;
        a.n_cells = g.n_cells;
    }

    // FastRule for the current edges (built with them); usable when its error bound is small.
    FastRule fast_rule{};
    bool fast_ok = false;
    FloatRule<false> float_rule{};  // the default single-precision rule (exact, branch-free)
    bool float_ok = false;
    DeviceArray<float> dev_t2;

    bool use_fast_rule() const { return fast_ok && !exact_only; }

    // Calls f(rule) with this frame's bin rule and returns its name: for T = float the
    // approximate-root FastRule (AllowFast, exact_sqrt=False) or the branch-free FloatRule
    // when the host could derive its limits, else ExactRule<T>. The float rules exist only
    // for T = float, so no double kernel is compiled with them.
    template <typename T, bool AllowFast, class F>
    const char* with_rule(const Binning<T>& bin, F&& f) const {
        if constexpr (std::is_same<T, float>::value) {
            if constexpr (AllowFast) {
                if (use_fast_rule()) {
                    f(fast_rule);
                    return "fast";
                }
            }
            if (float_ok) {
                const FloatRule<false>& fr = float_rule;
                if (fr.rmin == 0.f && fr.lo2 == 0.f)  // ranges from 0: two instructions less
                    f(FloatRule<true>{fr.lo2, fr.hi2, fr.rmin, fr.norm, fr.last});
                else
                    f(fr);
                return "exact";
            }
        }
        f(ExactRule<T>{bin});
        return "exact";
    }

    void build_fast_rule(const FrameProblem& p) {
        const Binning<float> bin = make_binning<float>(p, edges_f.data());
        const int nb = p.nbins;
        // the CPU kernel's float bin of r2, and whether r2 is in range
        auto bin_of = [&](float r2) { return bin.fast_bin(std::sqrt(r2)); };
        auto bits = [](float x) { uint32_t u; std::memcpy(&u, &x, 4); return u; };
        auto flt = [](uint32_t u) { float x; std::memcpy(&x, &u, 4); return x; };
        // smallest non-negative float satisfying a predicate that never turns false again
        auto first = [&](auto pred) -> uint32_t {
            uint32_t lo = 0, hi = 0x7f800000u;  // +inf
            if (pred(flt(lo))) return lo;
            while (hi - lo > 1) {
                const uint32_t mid = lo + (hi - lo) / 2;
                (pred(flt(mid)) ? hi : lo) = mid;
            }
            return hi;
        };
        const uint32_t lo_u = first([&](float r2) { return std::sqrt(r2) >= bin.rmin; });
        const uint32_t above_u = first([&](float r2) { return std::sqrt(r2) > bin.rmax; });
        fast_ok = above_u > lo_u;  // some r2 in range
        float_rule.lo2 = flt(lo_u);
        float_rule.hi2 = above_u > lo_u ? flt(above_u - 1) : -1.0f;  // none: nothing in range
        float_rule.rmin = bin.rmin;
        float_rule.norm = bin.norm;
        float_rule.last = nb - 1;
        // raw(): bin nbins at most (r == rmax and rounding), for its one extra slot
        const float f_hi = above_u > lo_u ? bin.coordinate(std::sqrt(float_rule.hi2)) : 0.f;
        float_ok = bin.norm < 1e12f && static_cast<int>(f_hi) <= nb;
        if (exact_only) {
            fast_ok = false;
            return;
        }
        std::vector<float> t2(nb + 1);
        t2[0] = 0.f;
        t2[nb] = INFINITY;
        for (int k = 1; k < nb && fast_ok; ++k) {
            const uint32_t u = first([&](float r2) {
                return bits(r2) >= above_u || (bits(r2) >= lo_u && bin_of(r2) >= k);
            });
            t2[k] = u >= above_u ? INFINITY : flt(u);
        }
        // error bound of the approximate coordinate: sqrt.approx.f32 is within 2^-22 relative
        // (PTX ISA); take 2^-21, plus a few ulp of the coordinate itself
        const double e = double(bin.norm) * double(bin.rmax) * std::ldexp(1.0, -21) +
                         double(nb) * std::ldexp(1.0, -20);
        fast_rule.lo2 = flt(lo_u);
        fast_rule.hi2 = flt(above_u - 1);
        fast_rule.rmin = bin.rmin;
        fast_rule.norm = bin.norm;
        fast_rule.delta = static_cast<float>(2.0 * e);
        fast_rule.nbins = nb;
        fast_ok = fast_ok && 2.0 * e < 0.25;
        if (fast_ok) {
            dev_t2.reserve(t2.size(), "the bin thresholds");
            check(cudaMemcpy(dev_t2.ptr, t2.data(), t2.size() * sizeof(float), cudaMemcpyHostToDevice),
                  "cudaMemcpy(thresholds)");
            fast_rule.t2 = dev_t2.ptr;
        }
    }

    void upload_edges(const FrameProblem& p) {
        if (edges.size() == static_cast<std::size_t>(p.nbins + 1) &&
            std::equal(edges.begin(), edges.end(), p.edges))
            return;
        check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
        edges.assign(p.edges, p.edges + p.nbins + 1);
        edges_f.assign(edges.begin(), edges.end());
        dev_edges_d.reserve(edges.size(), "the bin edges");
        dev_edges_f.reserve(edges.size(), "the bin edges");
        check(cudaMemcpy(dev_edges_d.ptr, edges.data(), edges.size() * sizeof(double),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy(edges)");
        check(cudaMemcpy(dev_edges_f.ptr, edges_f.data(), edges_f.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy(edges)");
        build_fast_rule(p);
    }

    template <typename T, class Box, class Rule>
    void launch_box(const KernelArgs& a, const Box& box, const Rule& rule, bool labels) {
        const bool global = launch.kernel == "global";
        const bool packed = launch.kernel == "packed";
        const std::size_t smem =
            std::size_t(tile_bytes(launch.threads)) +
            (global ? 0
             : packed ? std::size_t(packed_words(launch.window)) * 4
                      : std::size_t(launch.copies) * slots(launch.window) * 4);
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
            kernel<<<grid, launch.threads, smem, compute>>>(a, box, rule);
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

    template <typename T>
    void run(const FrameProblem& p, const float* xyz, std::size_t n, uint64_t* host_out) {
        check(cudaSetDevice(device), "cudaSetDevice");
        if (n >= static_cast<std::size_t>(0x7fffffff))
            throw std::invalid_argument("coords: more than 2^31 - 1 atoms");
        if (p.nbins > kMaxBins)
            throw std::invalid_argument("nbins: the CUDA kernels take at most 4,000,000 bins");
        if (pending && (out_pairs != p.n_pairs || out_nbins != p.nbins))
            throw std::logic_error("synchronize() the counts of the previous problem first");
        const std::size_t out_len = static_cast<std::size_t>(p.n_pairs) * p.nbins;
        if (!pending) {
            if (dev_out.reserve(out_len, "the histograms") || out_pairs != p.n_pairs ||
                out_nbins != p.nbins) {
                check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
                check(cudaMemset(dev_out.ptr, 0, out_len * sizeof(unsigned long long)), "cudaMemset");
            }
            out_pairs = p.n_pairs;
            out_nbins = p.nbins;
        }
        upload_edges(p);
        plan(p);

        // pack this frame into a pinned slot (waits for the copy that last used it)
        const int s = slot;
        slot ^= 1;
        const std::size_t atom_bytes = n * sizeof(float4);
        const std::size_t image_bytes = static_cast<std::size_t>(p.n_images) * 3 * sizeof(T);
        const std::size_t bytes = atom_bytes + image_bytes;
        check(cudaEventSynchronize(copy_done[s]), "cudaEventSynchronize");
        host_slot[s].reserve(bytes, "cudaMallocHost(frame buffer)");
        if (bytes > dev_slot[s].n) {
            check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
            dev_slot[s].reserve(bytes, "the frame's coordinates");
        }
        float4* packed = reinterpret_cast<float4*>(host_slot[s].ptr);
        // Pack (float4: x, y, z, label bits) and take the bounds; large frames on several
        // threads, so that the host keeps up with the GPU (1M atoms: a few ms on one core).
        struct Span {
            bool finite = true;
            float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        };
        auto pack = [&](std::size_t b, std::size_t e, Span& sp) {
            bool fin = true;
            float l0 = INFINITY, l1 = INFINITY, l2 = INFINITY, h0 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY;
            for (std::size_t i = b; i < e; ++i) {
                const float x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
                fin &= std::isfinite(x) & std::isfinite(y) & std::isfinite(z);
                l0 = std::min(l0, x);
                l1 = std::min(l1, y);
                l2 = std::min(l2, z);
                h0 = std::max(h0, x);
                h1 = std::max(h1, y);
                h2 = std::max(h2, z);
                const int32_t lab = p.labels ? p.labels[i] : 0;
                float w;
                std::memcpy(&w, &lab, sizeof(float));
                packed[i] = make_float4(x, y, z, w);
            }
            sp.finite = fin;
            sp.lo[0] = l0; sp.lo[1] = l1; sp.lo[2] = l2;
            sp.hi[0] = h0; sp.hi[1] = h1; sp.hi[2] = h2;
        };
        const int n_pack = n >= (1u << 18)
                               ? static_cast<int>(std::clamp<std::size_t>(n >> 17, 1, pack_threads))
                               : 1;
        std::vector<Span> spans(n_pack);
        {
            std::vector<std::thread> workers;
            const std::size_t chunk = (n + n_pack - 1) / n_pack;
            for (int t = 1; t < n_pack; ++t)
                workers.emplace_back(pack, std::min(n, t * chunk), std::min(n, (t + 1) * chunk),
                                     std::ref(spans[t]));
            pack(0, std::min(n, chunk), spans[0]);
            for (auto& w : workers) w.join();
        }
        bool finite = true;
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (const Span& sp : spans) {
            finite &= sp.finite;
            for (int d = 0; d < 3; ++d) {
                lo[d] = std::min(lo[d], sp.lo[d]);
                hi[d] = std::max(hi[d], sp.hi[d]);
            }
        }
        float max_abs = 0.f;
        for (int d = 0; d < 3 && n > 0; ++d) max_abs = std::max({max_abs, -lo[d], hi[d]});
        check_coordinates(p, finite, max_abs);
        bool use_cells = false;
        CellPlan cplan;
        if (method != kMethodAllPairs && n > 0) {
            const double lo_d[3] = {lo[0], lo[1], lo[2]}, hi_d[3] = {hi[0], hi[1], hi[2]};
            cplan = plan_cells(p, cell_k, cell_order, lo_d, hi_d);
            use_cells = method == kMethodCells || gpu_cells_pay(cplan);
        }
        if (use_cells) plan_cell_tables(p, cplan);
        // periodic all-pairs frames with many pairs per atom: spatial order (sort_spatially),
        // so that most chunks of j atoms take one image (tile_pairs)
        launch.sorted = p.box_kind != kNoBox && !use_cells && n > 0 && common_image != kImageOff &&
                        (common_image == kImageAlways || plan_pairs >= kSortPairsPerAtom * double(n));
        if (launch.sorted) {
            staging.assign(packed, packed + n);
            sort_spatially(staging.data(), packed, p.offsets, p.n_species, lo, hi, sort_key, sort_count);
        }
        T* images = reinterpret_cast<T*>(host_slot[s].ptr + atom_bytes);
        for (int k = 0; k < 3 * p.n_images; ++k) images[k] = static_cast<T>(p.images[k]);

        check(cudaStreamWaitEvent(copy, kernel_done[s], 0), "cudaStreamWaitEvent");
        check(cudaMemcpyAsync(dev_slot[s].ptr, host_slot[s].ptr, bytes, cudaMemcpyHostToDevice, copy),
              "cudaMemcpyAsync(coordinates)");
        check(cudaEventRecord(copy_done[s], copy), "cudaEventRecord");
        check(cudaStreamWaitEvent(compute, copy_done[s], 0), "cudaStreamWaitEvent");

        KernelArgs a;
        a.atoms = reinterpret_cast<const float4*>(dev_slot[s].ptr);
        a.tasks = dev_tasks.ptr;
        a.out = dev_out.ptr;
        a.nbins = p.nbins;
        a.window = launch.window;
        a.copies = std::max(launch.copies, 1);
        // No box and every pair within r_max (the dense path of the all-pairs kernel): a
        // pair's float r2 = (dx^2 + dy^2) + dz^2, rounded at each step, with the exact
        // |xj - xi| <= ex = hi_x - lo_x and so on; rounding is monotone and each of the five
        // roundings (difference, square, two sums) adds at most a factor 1 + 2^-24, so
        // r2 <= (ex^2 + ey^2 + ez^2) (1 + 2^-24)^5 < e2 (1 + 2^-20), and the frame is dense
        // when that is <= hi2. (tests/test_cuda.py has a frame whose corner pair rounds past
        // hi2 while e2 itself does not.)
        //
        // Orthorhombic box (OrthoBox<float>: l = float(L), inv = float(1 / L)): with d the float
        // difference (|d| <= e (1 + 2^-24)), n = nint(d * inv) and s = l n, d - s =
        // l (d / l - n) - l n delta; |d / l - n| <= 1/2 + |d| / L (3 + eps) 2^-24 (the
        // roundings of inv, l and d * inv) and |l n| <= |d| + l / 2, so |d - s| <= l / 2 +
        // (e + l) 5 2^-24; with the final subtraction's rounding |d'| <= l / 2 + (e + l) 2^-21.
        // The bound below adds m 2^-21 (m the largest |coordinate| of the axis), a margin kept
        // from a form of the image that moved atom i (xj - (xi + s), reverted: NOTES GPU item
        // 17); it only makes the test stricter. D := l / 2 + (e + l + m) 2^-21, and r2 <=
        // (Dx^2 + Dy^2 + Dz^2) (1 + 2^-20) as above.
        a.all_in_range = 0;
        if constexpr (std::is_same<T, float>::value) {
            if ((p.box_kind == kNoBox || p.box_kind == kOrtho) && float_ok && n > 0) {
                double e2 = 0.0;
                for (int d = 0; d < 3; ++d) {
                    const double e = double(hi[d]) - double(lo[d]);
                    if (p.box_kind == kNoBox) {
                        e2 += e * e;
                    } else {
                        const double l = static_cast<float>(p.ortho[d]);
                        const double m = std::max(std::fabs(double(lo[d])), std::fabs(double(hi[d])));
                        const double bound = 0.5 * l + (e + l + m) * 0x1p-21;
                        e2 += bound * bound;
                    }
                }
                a.all_in_range = e2 * (1.0 + 0x1p-20) <= double(float_rule.hi2);
            }
        }
        a.chunk_images = common_image != kImageOff;
        a.stats = dev_stats.ptr;
        const T* dev_edges = std::is_same<T, double>::value
                                 ? reinterpret_cast<const T*>(dev_edges_d.ptr)
                                 : reinterpret_cast<const T*>(dev_edges_f.ptr);
        const T* dev_images = reinterpret_cast<const T*>(dev_slot[s].ptr + atom_bytes);
        const Binning<T> bin = make_binning<T>(p, dev_edges);
        const bool labels = p.labels != nullptr;
        launch.rule = "exact";
        if (use_cells) {
            CellKernelArgs ca{};
            sort_into_cells(p, cplan, a.atoms, static_cast<int>(n), ca);
            ca.chunk_images = a.chunk_images;
            ca.stats = a.stats;
            if (n_cell_tasks > 0)
                with_rule<T, false>(bin, [&](const auto& rule) {
                    with_box<T>(p, dev_images, [&](const auto& box) { launch_cells<T>(ca, box, rule, labels); });
                });
        } else if (n_tasks > 0) {
            launch.rule = with_rule<T, true>(bin, [&](const auto& rule) {
                with_box<T>(p, dev_images, [&](const auto& box) { launch_box<T>(a, box, rule, labels); });
            });
        }
        check(cudaEventRecord(kernel_done[s], compute), "cudaEventRecord");
        pending = true;

        // self pairs, on the host (host edges: the same values as the device's)
        const T* host_edges = std::is_same<T, double>::value
                                  ? reinterpret_cast<const T*>(edges.data())
                                  : reinterpret_cast<const T*>(edges_f.data());
        add_self_pairs(p, make_binning<T>(p, host_edges), host_out);
    }

    void synchronize(uint64_t* out) {
        if (!pending) return;
        check(cudaSetDevice(device), "cudaSetDevice");
        const std::size_t len = static_cast<std::size_t>(out_pairs) * out_nbins;
        host_out.reserve(len + kStats, "cudaMallocHost(histograms)");
        check(cudaMemcpyAsync(host_out.ptr, dev_out.ptr, len * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, compute),
              "cudaMemcpyAsync(histograms)");
        check(cudaMemcpyAsync(host_out.ptr + len, dev_stats.ptr, kStats * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, compute),
              "cudaMemcpyAsync(statistics)");
        check(cudaMemsetAsync(dev_out.ptr, 0, len * sizeof(unsigned long long), compute), "cudaMemsetAsync");
        check(cudaMemsetAsync(dev_stats.ptr, 0, kStats * sizeof(unsigned long long), compute), "cudaMemsetAsync");
        check(cudaStreamSynchronize(compute), "the histogram kernels");
        for (std::size_t k = 0; k < len; ++k) out[k] += host_out.ptr[k];
        for (int k = 0; k < kStats; ++k) launch.image_chunks[k] = static_cast<long long>(host_out.ptr[len + k]);
        pending = false;
    }
};

Histogrammer::Histogrammer(int device, KernelChoice kernel, int max_window_bins, bool exact_sqrt,
                           int method, int cell_k, int cell_order)
    : impl_(new Impl(device, kernel, max_window_bins, exact_sqrt, method, cell_k, cell_order)) {}
Histogrammer::~Histogrammer() = default;

void Histogrammer::accumulate(const FrameProblem& p, const float* xyz, std::size_t n_atoms,
                              uint64_t* host_out) {
    if (p.n_pairs == 0 || p.nbins <= 0) return;
    if (p.double_precision)
        impl_->run<double>(p, xyz, n_atoms, host_out);
    else
        impl_->run<float>(p, xyz, n_atoms, host_out);
}

void Histogrammer::synchronize(uint64_t* out) { impl_->synchronize(out); }
bool Histogrammer::pending() const { return impl_->pending; }
const LaunchInfo& Histogrammer::last_launch() const { return impl_->launch; }
int Histogrammer::device() const { return impl_->device; }

}  // namespace gpu
}  // namespace fastrdf
