// The CUDA engine of one device (cuda.hpp): per frame it packs the coordinates into pinned
// memory, copies them on a copy stream while the previous frame's kernels run, plans the
// launch (all pairs or cell lists, kernel variant, tasks) and launches the kernels
// (allpairs.cuh, cells.cuh); counts stay on the device until synchronize().
//
// Design after CADISHI (K. Reuter & J. Köfinger, Comput. Phys. Commun. 236, 274 (2019),
// doi:10.1016/j.cpc.2018.10.018, Sec. 3.2) and VMD's GPU RDF (B. G. Levine, J. E. Stone &
// A. Kohlmeyer, J. Comput. Phys. 230, 3556 (2011), doi:10.1016/j.jcp.2011.01.048, Sec. 2.4):
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

#include "allpairs.cuh"
#include "binning.cuh"
#include "buffer.cuh"
#include "cells.cuh"
#include "common.cuh"
#include "fastrdf/cells.hpp"
#include "fastrdf/cuda.hpp"
#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"
#include "fastrdf/kernel_api.hpp"
#include "spatial_sort.cuh"

namespace fastrdf {
namespace gpu {

using namespace detail;

namespace {

// CPUs this process may run on (its affinity mask), at most cap.
std::size_t usable_cpus(std::size_t cap) {
    cpu_set_t set;
    std::size_t n = std::thread::hardware_concurrency();
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = static_cast<std::size_t>(CPU_COUNT(&set));
    return std::clamp<std::size_t>(n, 1, cap);
}

// Whether the cell kernel is expected to beat the all-pairs kernel on a GPU: the pairs it looks
// at (with the chunks' longer strips), plus sorting and four more launches (~3 10^7 pair-times,
// measured: benchmarks/NOTES.md "GPU cell lists").
bool gpu_cells_pay(const CellPlan& pl) {
    return pl.n[0] * pl.n[1] * pl.n[2] > 1 &&
           1.5 * pl.cell_pairs + 50.0 * pl.atoms + 3e7 < pl.allpairs_pairs;
}

float float_of(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

// The bits of the smallest non-negative float r2 for which pred(r2) holds, for a predicate that
// never turns false again as r2 grows (+inf's bits when it holds nowhere below).
template <class Pred>
uint32_t first_float(Pred pred) {
    uint32_t lo = 0, hi = 0x7f800000u;  // +inf
    if (pred(float_of(lo))) return lo;
    while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        (pred(float_of(mid)) ? hi : lo) = mid;
    }
    return hi;
}

bool same_vector(const std::vector<int64_t>& v, const int64_t* p, std::size_t n) {
    return v.size() == n && std::equal(v.begin(), v.end(), p);
}

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
    // Double precision through the float filter (filter.cuh): the bound of double_filter_delta
    // is multiplied by this (1; 0 runs every pair in double: tests, and
    // FASTRDF_CUDA_DOUBLE_FILTER=off for measurements); plan_filter: the launch shapes keep
    // room for the filter's queues (double-precision problems while the filter is on)
    double double_filter = 1.0;
    double sqrt_err = -1.0;  // sqrt_approx_error of the device (measured at the first use)
    bool plan_filter = false;
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
    bool task_filter = false;
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
        if (!exact && !FASTRDF_CUDA_FAST_RULE)
            throw std::invalid_argument(
                "exact_sqrt=False: this build has no approximate-root kernels (an experiment, "
                "slower than the default); rebuild with -C cmake.define.FASTRDF_CUDA_FAST_RULE=ON "
                "or keep exact_sqrt=True");
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
        double_filter = env_choice("FASTRDF_CUDA_DOUBLE_FILTER", {{"on", 1}, {"off", 0}}, 1);
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
        long long cap = (static_cast<long long>(info.shared_per_block_optin) - tile_bytes(threads) -
                         reserved(threads)) / 4;
        cap = packed ? 2 * (cap - kPackedDummies) - 2  // inverse of packed_words
                     : cap - 1;                      // inverse of slots
        if (max_window_bins > 0) cap = std::min<long long>(cap, max_window_bins);
        return static_cast<int>(std::max<long long>(cap, 1));
    }

    // Sub-histograms per block of `threads` for a 32-bit window: up to one per warp, within
    // kCopyBudgetWords (blocks of kThreads) or the block's shared memory (kWideThreads: one
    // block per multiprocessor, which measured faster than two, benchmarks/NOTES.md item 13).
    int window_copies(int window, int threads) const {
        const std::size_t fixed = tile_bytes(threads) + reserved(threads);
        const int budget = threads == kWideThreads
                               ? static_cast<int>((info.shared_per_block_optin - fixed) / 4)
                               : kCopyBudgetWords;
        int copies = std::clamp(budget / slots(window), 1, threads / 32);
        while (copies > 1 && static_cast<std::size_t>(copies) * slots(window) * 4 + fixed >
                                 info.shared_per_block_optin)
            --copies;
        return copies;
    }

    // Shared bytes a block of `threads` keeps beside its tile and counters: the filter's queues
    // and their alignment (filter.cuh), when plan_filter.
    std::size_t reserved(int threads) const {
        return plan_filter ? static_cast<std::size_t>(queue_bytes(threads)) + 4 : 0;
    }

    void plan(const FrameProblem& p) {
        plan_filter = p.double_precision && double_filter > 0.0;
        const bool same_tasks = task_nbins == p.nbins && task_filter == plan_filter &&
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
        task_filter = plan_filter;
        launch.method = "allpairs";
        allpairs_launch = launch;
    }

    // Static tables of the cell kernel (column ranks, task list, species), rebuilt when the
    // grid's shape or the species change; and the launch shape.
    void plan_cell_tables(const FrameProblem& p, const CellPlan& pl) {
        plan_filter = p.double_precision && double_filter > 0.0;
        std::vector<int64_t> key = {pl.n[0], pl.n[1], pl.n[2], pl.k, pl.order, pl.periodic ? 1 : 0,
                                    p.nbins, plan_filter ? 1 : 0};
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
        const std::size_t jt_bytes = tile_bytes(kCellThreads) + reserved(kCellThreads);
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
                    g.f[d][c] = is_triclinic_kind(p.box_kind) ? p.reciprocal[3 * d + c]
                                                         : (c == d ? 1.0 / p.ortho[d] : 0.0);
        sort_cells_on_device(atoms, n, g, dev_offsets32.ptr, dev_rank.ptr, dev_cell_of.ptr,
                             dev_start.ptr, dev_fill.ptr, dev_sorted.ptr, dev_zcell.ptr, compute);
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
            if constexpr (AllowFast && FASTRDF_CUDA_FAST_RULE) {
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

    // The float rule of the filter for a frame whose bound is delta (double_filter_delta, bins):
    // with d = delta rounded up to a multiple of 2^-20 (so that nbins + d and 1/2 - d are exact
    // in double), r2 is in its range when the float coordinate f of r2 lies within [-d, L], L the
    // largest float <= nbins + d (lo2, hi2 by bisection over the float bit patterns, as for the
    // single-precision rule: f never decreases with r2); near: the largest float <= 1/2 - d (from
    // 0: the flag is |f - (trunc f + 1/2)| >= near) or d (|f - rint f| <= d). False when no such
    // rule can be built (then the frame runs all in double). See docs/design.rst, section "The
    // float filter on the GPU".
    // the frame's filter runs from 0 (FilterFrom0, the approximate root; as with_rule decides)
    static bool filter_from0(const FloatRule<false>& fr) { return fr.rmin == 0.f && fr.lo2 == 0.f; }

    bool build_filter_rule(const FrameProblem& p, double delta, FloatRule<false>& fr, float& near) const {
        const Binning<float> bin = make_binning<float>(p, edges_f.data());
        if (!(bin.norm < 1e12f) || !(delta >= 0.0)) return false;
        const double d = std::ceil(delta * 0x1p20) * 0x1p-20;
        if (!(d < 0.25)) return false;
        const double top = double(p.nbins) + d;
        float top_f = static_cast<float>(top);
        if (double(top_f) > top) top_f = std::nextafter(top_f, 0.f);
        const float bottom = static_cast<float>(-d);  // exact
        auto coordinate = [&](float r2) { return bin.coordinate(std::sqrt(r2)); };
        const uint32_t lo_u = first_float([&](float r2) { return coordinate(r2) >= bottom; });
        const uint32_t above_u = first_float([&](float r2) { return !(coordinate(r2) <= top_f); });
        fr.lo2 = float_of(lo_u);
        fr.hi2 = above_u > lo_u ? float_of(above_u - 1) : -1.0f;  // none: nothing in range
        fr.rmin = bin.rmin;
        fr.norm = bin.norm;
        fr.last = p.nbins - 1;
        if (fr.rmin == 0.f && fr.lo2 == 0.f) {
            const double h = 0.5 - d;
            near = static_cast<float>(h);
            if (double(near) > h) near = std::nextafter(near, 0.f);
        } else {
            near = static_cast<float>(d);
        }
        return true;
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
        constexpr bool kDouble = std::is_same<T, double>::value;
        // double precision through the float filter (filter.cuh), unless it is off
        const bool want_filter = kDouble && double_filter > 0.0;
        const std::size_t atom_bytes = n * sizeof(float4);
        // the triclinic images in T, then (double: for the filter's float kernels) in float
        const std::size_t n_img = static_cast<std::size_t>(p.n_images) * 3;
        const std::size_t image_bytes = n_img * sizeof(T) + (kDouble ? n_img * sizeof(float) : 0);
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
            double plo[3] = {INFINITY, INFINITY, INFINITY}, phi[3] = {-INFINITY, -INFINITY, -INFINITY};
        };
        // The filter's bound needs, in a triclinic box, the spread of the index arguments
        // f_k . x over the atoms (frame_images, kernel_api.hpp): taken in the same pass. (In an
        // orthorhombic box f_k . x = x_k / L_k rises with x_k, and rounding is monotone, so the
        // extremes are those of the coordinates' bounds, below: no pass.)
        const bool projections = want_filter && p.box_kind == kTriclinic;
        double fco[3][3];
        image_coefficients(p, fco);
        auto pack_with = [&](auto with_projections, std::size_t b, std::size_t e, Span& sp) {
            bool fin = true;
            float l0 = INFINITY, l1 = INFINITY, l2 = INFINITY, h0 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY;
            double pl0 = INFINITY, pl1 = INFINITY, pl2 = INFINITY;
            double ph0 = -INFINITY, ph1 = -INFINITY, ph2 = -INFINITY;
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
                if constexpr (decltype(with_projections)::value) {
                    const double xd = x, yd = y, zd = z;
                    const double v0 = fco[0][0] * xd + fco[0][1] * yd + fco[0][2] * zd;
                    const double v1 = fco[1][0] * xd + fco[1][1] * yd + fco[1][2] * zd;
                    const double v2 = fco[2][0] * xd + fco[2][1] * yd + fco[2][2] * zd;
                    pl0 = std::min(pl0, v0);
                    pl1 = std::min(pl1, v1);
                    pl2 = std::min(pl2, v2);
                    ph0 = std::max(ph0, v0);
                    ph1 = std::max(ph1, v1);
                    ph2 = std::max(ph2, v2);
                }
            }
            sp.plo[0] = pl0; sp.plo[1] = pl1; sp.plo[2] = pl2;
            sp.phi[0] = ph0; sp.phi[1] = ph1; sp.phi[2] = ph2;
            sp.finite = fin;
            sp.lo[0] = l0; sp.lo[1] = l1; sp.lo[2] = l2;
            sp.hi[0] = h0; sp.hi[1] = h1; sp.hi[2] = h2;
        };
        auto pack = [&](std::size_t b, std::size_t e, Span& sp) {
            if (projections)
                pack_with(std::true_type{}, b, e, sp);
            else
                pack_with(std::false_type{}, b, e, sp);
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
        double plo[3] = {0.0, 0.0, 0.0}, phi[3] = {0.0, 0.0, 0.0};  // (no box: f = 0)
        if (projections)
            for (int k = 0; k < 3; ++k) {
                plo[k] = INFINITY;
                phi[k] = -INFINITY;
            }
        for (const Span& sp : spans) {
            finite &= sp.finite;
            for (int d = 0; d < 3; ++d) {
                lo[d] = std::min(lo[d], sp.lo[d]);
                hi[d] = std::max(hi[d], sp.hi[d]);
                if (projections) {
                    plo[d] = std::min(plo[d], sp.plo[d]);
                    phi[d] = std::max(phi[d], sp.phi[d]);
                }
            }
        }
        float max_abs = 0.f;
        for (int d = 0; d < 3 && n > 0; ++d) max_abs = std::max({max_abs, -lo[d], hi[d]});
        check_coordinates(p, finite, max_abs);
        if (want_filter && (p.box_kind == kOrtho || p.box_kind == kOrthoScaled))
            for (int k = 0; k < 3; ++k) {  // f_kk x_k, as frame_images takes it, at the extremes
                plo[k] = fco[k][k] * double(lo[k]);
                phi[k] = fco[k][k] * double(hi[k]);
            }
        // Double precision: the float filter's bound for this frame (double_filter_delta; < 0:
        // every pair in double) and its float rule (widened range, flag threshold)
        double delta = -1.0;
        FloatRule<false> filter_fr{};
        float filter_near = 0.f;
        if (want_filter && n > 0) {
            const FrameImages fi = frame_images_from(plo, phi, max_abs);
            delta = double_filter * double_filter_delta(p, fi);
            if (delta >= 0.0 && !build_filter_rule(p, delta, filter_fr, filter_near)) delta = -1.0;
            if (delta >= 0.0 && filter_from0(filter_fr)) {
                // from 0 the filter's coordinate takes the approximate root (filter.cuh): the
                // bound with the error measured on this device, and at least the CPU's (the
                // widened range is the CPU coordinate's)
                if (sqrt_err < 0.0) sqrt_err = sqrt_approx_error(device);
                const double root_u = sqrt_err * 0x1p24 * (1.0 + 0x1p-20) + 0x1p-20;
                const double dg = double_filter_delta(p, fi, FilterArithmetic{root_u, 2.0});
                delta = dg >= 0.0 ? std::max(delta, double_filter * dg) : -1.0;
                if (delta >= 0.0 && !build_filter_rule(p, delta, filter_fr, filter_near)) delta = -1.0;
                if (delta >= 0.0 && !filter_from0(filter_fr)) delta = -1.0;  // (cannot happen)
            }
        }
        const bool filter = delta >= 0.0;
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
        for (std::size_t k = 0; k < n_img; ++k) images[k] = static_cast<T>(p.images[k]);
        float* images_f = reinterpret_cast<float*>(host_slot[s].ptr + atom_bytes + n_img * sizeof(T));
        if (kDouble)
            for (std::size_t k = 0; k < n_img; ++k) images_f[k] = static_cast<float>(p.images[k]);

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
        // Dense frames (no box or orthorhombic, single precision or the filter): every pair is
        // within r_max when a bound on the float r2 of any pair, from the coordinates' extent e
        // (and, in an orthorhombic box, the image bound D = l / 2 + (e + l + m) 2^-21 per axis),
        // times (1 + 2^-20) is <= hi2 of the float rule (the filter's widened one) (see
        // docs/design.rst, section "Dense frames (GPU)").
        a.all_in_range = 0;
        if (!kDouble || filter) {
            const float hi2 = filter ? filter_fr.hi2 : float_rule.hi2;
            if ((p.box_kind == kNoBox || p.box_kind == kOrtho) && (float_ok || filter) && n > 0) {
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
                a.all_in_range = e2 * (1.0 + 0x1p-20) <= double(hi2);
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
        launch.filter_delta = delta;
        CellKernelArgs ca{};
        if (use_cells) {
            sort_into_cells(p, cplan, a.atoms, static_cast<int>(n), ca);
            ca.chunk_images = a.chunk_images;
            ca.stats = a.stats;
        }
        if (filter) {
            // every pair in float, the flagged ones settled in double (filter.cuh)
            launch.rule = "filter";
            const Binning<double> bin_d = make_binning<double>(p, dev_edges_d.ptr);
            const float* dev_images_f = reinterpret_cast<const float*>(dev_slot[s].ptr + atom_bytes + n_img * sizeof(T));
            const double* dev_images_d = reinterpret_cast<const double*>(dev_slot[s].ptr + atom_bytes);
            with_boxes<false>(p, [&](const auto& box_f, const auto& box_d) {
                using BoxD = std::decay_t<decltype(box_d)>;
                auto go = [&](const auto& fr) {
                    using FR = std::decay_t<decltype(fr)>;
                    // hlim = 2^23 + nbins - 1 (from 0: the flag's clamp, filter.cuh)
                    const float hlim = static_cast<float>(8388608.0 + double(p.nbins) - 1.0);
                    const FilterRule<FR, BoxD> rule{fr, filter_near, box_d, ExactRule<double>{bin_d}, hlim};
                    if (use_cells) {
                        if (n_cell_tasks > 0)
                            launch_cells<float>(launch, ca, box_f, rule, labels, n_cell_tasks, compute);
                    } else if (n_tasks > 0) {
                        launch_allpairs<float>(launch, a, box_f, rule, labels, n_tasks, compute);
                    }
                };
                if (filter_from0(filter_fr))  // from 0 (as with_rule)
                    go(FloatRule<true>{filter_fr.lo2, filter_fr.hi2, filter_fr.rmin, filter_fr.norm,
                                       filter_fr.last});
                else
                    go(filter_fr);
            }, dev_images_f, dev_images_d);
        } else if (use_cells) {
            if (n_cell_tasks > 0)
                with_rule<T, false>(bin, [&](const auto& rule) {
                    with_box<T, true, false>(p, dev_images, [&](const auto& box) {
                        launch_cells<T>(launch, ca, box, rule, labels, n_cell_tasks, compute);
                    });
                });
        } else if (n_tasks > 0) {
            launch.rule = with_rule<T, true>(bin, [&](const auto& rule) {
                with_box<T, true, false>(p, dev_images, [&](const auto& box) {
                    launch_allpairs<T>(launch, a, box, rule, labels, n_tasks, compute);
                });
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
        for (int k = 0; k < 3; ++k) launch.image_chunks[k] = static_cast<long long>(host_out.ptr[len + k]);
        launch.settled = static_cast<long long>(host_out.ptr[len + 3]);
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
double Histogrammer::double_filter() const { return impl_->double_filter; }
void Histogrammer::set_double_filter(double scale) {
    if (!(scale >= 0.0 && scale <= 1.0)) throw std::invalid_argument("_double_filter: must be in [0, 1]");
    impl_->double_filter = scale;
}
bool Histogrammer::pending() const { return impl_->pending; }
const LaunchInfo& Histogrammer::last_launch() const { return impl_->launch; }
int Histogrammer::device() const { return impl_->device; }

}  // namespace gpu
}  // namespace fastrdf
