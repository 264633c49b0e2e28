// The CUDA engine of one device (cuda.hpp): per frame it packs the coordinates into pinned
// memory, copies them on a copy stream while the previous frame's kernels run, plans the
// launch (all pairs or cell lists, kernel variant, tasks) and launches the kernels
// (allpairs.cuh, cells.cuh); counts stay on the device until synchronize().
// Its parts, by job, in this translation unit: engine_pack.cuh (the frame's slot, packing
// and bounds), engine_rules.cuh (the host side of the bin rules), engine_launch.cuh (the
// launch plan); this file holds the engine's state and the orchestration of a frame.
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

    // The launch plan (engine_launch.cuh): the shared-memory window and its sub-histograms, the
    // kernel and tasks of all pairs (plan) or of cell lists, and the sort into cells.
    int window_cap(int threads, bool packed = false) const;
    int window_copies(int window, int threads) const;
    std::size_t reserved(int threads) const;
    void plan(const FrameProblem& p);
    void plan_cell_tables(const FrameProblem& p, const CellPlan& pl);
    void sort_into_cells(const FrameProblem& p, const CellPlan& pl, const float4* atoms, int n,
                         CellKernelArgs& a);

    // FastRule for the current edges (built with them); usable when its error bound is small.
    FastRule fast_rule{};
    bool fast_ok = false;
    FloatRule<false> float_rule{};  // the default single-precision rule (exact, branch-free)
    bool float_ok = false;
    DeviceArray<float> dev_t2;

    // The bin rules (engine_rules.cuh): FastRule and FloatRule for the current edges, the
    // frame's rule (with_rule) and the float filter's.
    bool use_fast_rule() const;
    template <typename T, bool AllowFast, class F>
    const char* with_rule(const Binning<T>& bin, F&& f) const;
    void build_fast_rule(const FrameProblem& p);
    static bool filter_from0(const FloatRule<false>& fr);
    bool build_filter_rule(const FrameProblem& p, double delta, FloatRule<false>& fr, float& near) const;
    void upload_edges(const FrameProblem& p);

    // A frame in slot s of host_slot and dev_slot (float4 atoms, then the images), with the
    // bounds taken while packing it (engine_pack.cuh).
    struct Frame {
        int s = 0;
        std::size_t n = 0, atom_bytes = 0, n_img = 0, bytes = 0;
        float4* packed = nullptr;
        bool want_filter = false;  // double precision through the float filter (filter.cuh)
        double fco[3][3] = {};     // image_coefficients
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        double plo[3] = {0.0, 0.0, 0.0}, phi[3] = {0.0, 0.0, 0.0};  // (no box: f = 0)
        float max_abs = 0.f;
    };
    // The float filter of a frame: its bound (delta < 0: every pair in double) and rule.
    struct FrameFilter {
        double delta = -1.0;
        FloatRule<false> fr{};
        float near = 0.f;
    };
    template <typename T>
    Frame take_slot(const FrameProblem& p, std::size_t n);
    void pack_frame(const FrameProblem& p, const float* xyz, Frame& f);
    template <typename T>
    void copy_frame(const FrameProblem& p, const Frame& f);
    FrameFilter frame_filter(const FrameProblem& p, const Frame& f);
    bool plan_frame(const FrameProblem& p, Frame& f, CellPlan& cplan);
    template <typename T>
    int all_in_range(const FrameProblem& p, const Frame& f, const FrameFilter& ff) const;

    // Checks the frame against the counts still pending; readies the totals, edges and plan.
    void begin_frame(const FrameProblem& p, std::size_t n) {
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
    }

    // The frame's kernels on the compute stream: all pairs or cell lists, with the float
    // filter or T's bin rule.
    template <typename T>
    void launch_frame(const FrameProblem& p, const Frame& f, const FrameFilter& ff, bool use_cells,
                      const CellPlan& cplan) {
        const int s = f.s;
        const std::size_t n = f.n, atom_bytes = f.atom_bytes, n_img = f.n_img;
        const double delta = ff.delta;
        const FloatRule<false>& filter_fr = ff.fr;
        const float filter_near = ff.near;
        const bool filter = delta >= 0.0;
        KernelArgs a;
        a.atoms = reinterpret_cast<const float4*>(dev_slot[s].ptr);
        a.tasks = dev_tasks.ptr;
        a.out = dev_out.ptr;
        a.nbins = p.nbins;
        a.window = launch.window;
        a.copies = std::max(launch.copies, 1);
        a.all_in_range = all_in_range<T>(p, f, ff);  // dense frames
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
    }

    template <typename T>
    void run(const FrameProblem& p, const float* xyz, std::size_t n, uint64_t* host_out) {
        begin_frame(p, n);
        Frame f = take_slot<T>(p, n);
        pack_frame(p, xyz, f);
        const FrameFilter ff = frame_filter(p, f);
        CellPlan cplan;
        const bool use_cells = plan_frame(p, f, cplan);
        copy_frame<T>(p, f);
        launch_frame<T>(p, f, ff, use_cells, cplan);
        check(cudaEventRecord(kernel_done[f.s], compute), "cudaEventRecord");
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

}  // namespace gpu
}  // namespace fastrdf

#define FASTRDF_ENGINE_PART 1  // the engine_*.cuh parts below may be included
#include "engine_launch.cuh"
#include "engine_pack.cuh"
#include "engine_rules.cuh"

namespace fastrdf {
namespace gpu {

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
