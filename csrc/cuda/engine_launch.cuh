// The launch plan: the kernel and block shape of a frame's problem, its task lists (all
// pairs, cell lists), the choice between the two, and the dense-frame bound.
// Part of engine.cu, which includes it after the definition of Histogrammer::Impl;
// never compiled on its own.
#ifndef FASTRDF_ENGINE_PART
#error "a part of csrc/cuda/engine.cu, included by it only"
#endif

namespace fastrdf::gpu {

namespace {

// Whether the cell kernel is expected to beat the all-pairs kernel on a GPU: the pairs it looks
// at (with the chunks' longer strips), plus sorting and four more launches (~3 10^7 pair-times,
// measured: benchmarks/NOTES.md "GPU cell lists").
bool gpu_cells_pay(const CellPlan& pl) {
    return pl.n[0] * pl.n[1] * pl.n[2] > 1 &&
           1.5 * pl.cell_pairs + 50.0 * pl.atoms + 3e7 < pl.allpairs_pairs;
}

}  // namespace

// Largest window of bins one block of `threads` can hold in shared memory: 32-bit
// counters (slots(window) of them), or (packed) two 16-bit counters per word.
inline int Histogrammer::Impl::window_cap(int threads, bool packed) const {
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
inline int Histogrammer::Impl::window_copies(int window, int threads) const {
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
inline std::size_t Histogrammer::Impl::reserved(int threads) const {
    return plan_filter ? static_cast<std::size_t>(queue_bytes(threads)) + 4 : 0;
}

inline void Histogrammer::Impl::plan(const FrameProblem& p) {
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
inline void Histogrammer::Impl::plan_cell_tables(const FrameProblem& p, const CellPlan& pl) {
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
inline void Histogrammer::Impl::sort_into_cells(const FrameProblem& p, const CellPlan& pl,
                                                const float4* atoms, int n, CellKernelArgs& a) {
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

// All pairs or cell lists for this frame (its bounds); the cell tables, or the spatial sort of
// the packed atoms (periodic all-pairs frames with many pairs per atom). True: cell lists.
inline bool Histogrammer::Impl::plan_frame(const FrameProblem& p, Frame& f, CellPlan& cplan) {
    const std::size_t n = f.n;
    bool use_cells = false;
    if (method != kMethodAllPairs && n > 0) {
        const double lo_d[3] = {f.lo[0], f.lo[1], f.lo[2]}, hi_d[3] = {f.hi[0], f.hi[1], f.hi[2]};
        cplan = plan_cells(p, cell_k, cell_order, lo_d, hi_d);
        use_cells = method == kMethodCells || gpu_cells_pay(cplan);
    }
    if (use_cells) plan_cell_tables(p, cplan);
    // periodic all-pairs frames with many pairs per atom: spatial order (sort_spatially),
    // so that most chunks of j atoms take one image (tile_pairs)
    launch.sorted = p.box_kind != kNoBox && !use_cells && n > 0 && common_image != kImageOff &&
                    (common_image == kImageAlways || plan_pairs >= kSortPairsPerAtom * double(n));
    if (launch.sorted) {
        staging.assign(f.packed, f.packed + n);
        sort_spatially(staging.data(), f.packed, p.offsets, p.n_species, f.lo, f.hi, sort_key, sort_count);
    }
    return use_cells;
}

// Dense frames (no box or orthorhombic, single precision or the filter): every pair is
// within r_max when a bound on the float r2 of any pair, from the coordinates' extent e
// (and, in an orthorhombic box, the image bound D = l / 2 + (e + l + m) 2^-21 per axis),
// times (1 + 2^-20) is <= hi2 of the float rule (the filter's widened one) (see
// docs/design.rst, section "Dense frames (GPU)"). KernelArgs::all_in_range.
template <typename T>
inline int Histogrammer::Impl::all_in_range(const FrameProblem& p, const Frame& f,
                                            const FrameFilter& ff) const {
    constexpr bool kDouble = std::is_same<T, double>::value;
    const bool filter = ff.delta >= 0.0;
    const std::size_t n = f.n;
    int dense = 0;
    if (!kDouble || filter) {
        const float hi2 = filter ? ff.fr.hi2 : float_rule.hi2;
        if ((p.box_kind == kNoBox || p.box_kind == kOrtho) && (float_ok || filter) && n > 0) {
            double e2 = 0.0;
            for (int d = 0; d < 3; ++d) {
                const double e = double(f.hi[d]) - double(f.lo[d]);
                if (p.box_kind == kNoBox) {
                    e2 += e * e;
                } else {
                    const double l = static_cast<float>(p.ortho[d]);
                    const double m = std::max(std::fabs(double(f.lo[d])), std::fabs(double(f.hi[d])));
                    const double bound = 0.5 * l + (e + l + m) * 0x1p-21;
                    e2 += bound * bound;
                }
            }
            dense = e2 * (1.0 + 0x1p-20) <= double(hi2);
        }
    }
    return dense;
}

}  // namespace fastrdf::gpu
