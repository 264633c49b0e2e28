// The direct k-space sum on the GPU (host API: fastrdf/kspace_cuda.hpp; maths: fastrdf/kspace.hpp
// and docs/design.rst, "Direct k-space sum").
//
// 1. tables: e_c(n) = exp(i 2 pi n s_c) for every atom, axis and n = 0 .. rows_c - 1, each from
//    sincospi (no recurrence), in device memory, row-major (row, atom);
// 2. sums: a thread owns one (n1, n2) group and the m = t, t + T, ..., t + (kRegs - 1) T of it
//    (T threads share a group); a block of kThreads such tasks walks the atoms of one
//    super-chunk (atoms of one species), staging the tables of kChunk atoms at a time in
//    shared memory ([atom][row]: the threads of a warp read one atom's rows, neighbouring m
//    from neighbouring threads), and adds, atom by atom in order, the four real sums of each
//    of its m; it writes the +m and -m amplitudes of its super-chunk into a partial buffer;
// 3. reduce: for each species and slot, the partials of its super-chunks added in a fixed
//    order (a warp per slot: lanes over the chunks, then a butterfly).
// Every sum has a fixed order (atoms in order within a super-chunk, super-chunks in order), so
// the result is the same on every run; the super-chunks depend on the problem only, not on the
// device. IEEE arithmetic (--fmad=false, CMakeLists.txt), as on the CPU; the two differ by the
// order of the sums and the tables' source (sincospi here, sin/cos + recurrence there).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "buffer.cuh"
#include "common.cuh"
#include "fastrdf/kspace_cuda.hpp"

namespace fastrdf {
namespace gpu {

using detail::check;
using detail::DeviceArray;
using detail::PinnedArray;

namespace {

constexpr int kThreads = 128;  // tasks per block
// m values per task (4 kRegs double accumulators). 4, not 8: an H200 ran the 16,000 atoms x
// 2,348 vectors of IntermediateScattering's benchmark in 2 x 63 blocks of 124 registers a
// thread, 6 % occupancy, 188 us (Nsight Compute; benchmarks/NOTES.md); fewer m a task give
// more tasks, fewer registers and fewer idle m slots (a group of 11 m took 2 tasks of 8).
constexpr int kRegs = 4;
constexpr int kMaxChunk = 32;  // atoms staged in shared memory at a time
constexpr long long kMinSuperChunk = kMaxChunk;
// super-chunks are sized for about this many blocks (a few waves of an H100/H200's 132 SMs
// at the kernel's occupancy), so that a frame of ~10^4 atoms fills the device
constexpr long long kTargetBlocks = 4096;
constexpr double kMaxPartialBytes = 1024.0 * 1024.0 * 1024.0;

struct Task {
    int n1, n2, n3c, m_count;
    long long slot;
    int t, stride;  // m = t + stride r, r < kRegs
};

struct SuperChunk {
    long long begin, end;
};

__global__ void tables_kernel(const double* __restrict__ s, long long n_atoms, int rows0, int rows1,
                              int rows_total, double2* __restrict__ tables) {
    const long long j = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    const int row = blockIdx.y;
    if (j >= n_atoms || row >= rows_total) return;
    const int axis = row < rows0 ? 0 : (row < rows0 + rows1 ? 1 : 2);
    const int n = row - (axis == 0 ? 0 : (axis == 1 ? rows0 : rows0 + rows1));
    double x = n * s[3 * j + axis];
    x -= rint(x);  // exact
    double sn, cs;
    sincospi(2.0 * x, &sn, &cs);
    tables[row * n_atoms + j] = make_double2(cs, sn);
}

__device__ __forceinline__ double2 conj_if(double2 v, bool neg) {
    return make_double2(v.x, neg ? -v.y : v.y);
}

__device__ __forceinline__ double2 cmul(double2 a, double2 b) {
    return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

__global__ void __launch_bounds__(kThreads)
sums_kernel(const Task* __restrict__ tasks, long long n_tasks, const SuperChunk* __restrict__ chunks,
            const double2* __restrict__ tables, long long n_atoms, int rows0, int rows1,
            int rows_total, int stride, int chunk_atoms, long long n_slots,
            double2* __restrict__ partial) {
    extern __shared__ double2 sh[];
    const long long task_index = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x;
    const bool active = task_index < n_tasks;
    Task task = {};
    if (active) task = tasks[task_index];
    const SuperChunk sc = chunks[blockIdx.y];
    const int row1 = abs(task.n1), row2 = rows0 + abs(task.n2), row3 = rows0 + rows1 + abs(task.n3c);
    const int row_m = rows0 + rows1;
    double rr[kRegs], ii[kRegs], ri[kRegs], ir[kRegs];
#pragma unroll
    for (int r = 0; r < kRegs; ++r) rr[r] = ii[r] = ri[r] = ir[r] = 0.0;
    for (long long j0 = sc.begin; j0 < sc.end; j0 += chunk_atoms) {
        const int cnt = static_cast<int>(min(static_cast<long long>(chunk_atoms), sc.end - j0));
        __syncthreads();
        for (int idx = threadIdx.x; idx < rows_total * cnt; idx += kThreads) {
            const int row = idx / cnt, j = idx - row * cnt;
            sh[j * stride + row] = tables[row * n_atoms + j0 + j];
        }
        __syncthreads();
        if (!active) continue;
        for (int j = 0; j < cnt; ++j) {
            const double2* a = sh + j * stride;
            const double2 p = cmul(cmul(conj_if(a[row1], task.n1 < 0), conj_if(a[row2], task.n2 < 0)),
                                   conj_if(a[row3], task.n3c < 0));
#pragma unroll
            for (int r = 0; r < kRegs; ++r) {
                const int m = task.t + task.stride * r;
                if (m < task.m_count) {
                    const double2 c = a[row_m + m];
                    rr[r] += p.x * c.x;
                    ii[r] += p.y * c.y;
                    ri[r] += p.x * c.y;
                    ir[r] += p.y * c.x;
                }
            }
        }
    }
    if (!active) return;
    double2* out = partial + blockIdx.y * n_slots + task.slot;
#pragma unroll
    for (int r = 0; r < kRegs; ++r) {
        const int m = task.t + task.stride * r;
        if (m < task.m_count) {
            out[2 * m] = make_double2(rr[r] - ii[r], ri[r] + ir[r]);         // n3c + m
            out[2 * m + 1] = make_double2(rr[r] + ii[r], ir[r] - ri[r]);     // n3c - m
        }
    }
}

// acc[a][slot] = the sum over the super-chunks of species a (first[a] .. first[a + 1]): one
// warp per (species, slot); lane l adds the chunks first + l, first + l + 32, ... in order,
// then the lanes' sums are added by a fixed butterfly. The order depends on the number of
// super-chunks alone, so every run gives the same bits. (One thread adding every chunk in
// turn waited a memory latency per chunk: 13 us for 63 chunks on an H200.)
__global__ void reduce_kernel(const double2* __restrict__ partial, const long long* __restrict__ first,
                              int n_species, long long n_slots, double2* __restrict__ acc) {
    const long long warp = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x & 31);
    if (warp >= n_species * n_slots) return;  // (a whole warp leaves together)
    const int a = static_cast<int>(warp / n_slots);
    const long long slot = warp - a * n_slots;
    double x = 0.0, y = 0.0;
    for (long long c = first[a] + lane; c < first[a + 1]; c += 32) {
        const double2 v = partial[c * n_slots + slot];
        x += v.x;
        y += v.y;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        x += __shfl_xor_sync(0xffffffffu, x, o);
        y += __shfl_xor_sync(0xffffffffu, y, o);
    }
    if (lane == 0) acc[warp] = make_double2(x, y);
}

}  // namespace

struct KSpaceSums::Impl {
    int device = 0;
    cudaStream_t stream = nullptr;
    std::size_t smem_optin = 0;
    DeviceArray<double> d_s;
    DeviceArray<double2> d_tables, d_partial, d_acc;
    DeviceArray<Task> d_tasks;
    DeviceArray<SuperChunk> d_chunks;
    DeviceArray<long long> d_first;
    PinnedArray<double> h_s;
    PinnedArray<double2> h_acc;
    std::shared_ptr<const kspace::Plan> plan;  // the plan whose tasks d_tasks holds
    std::vector<SuperChunk> chunks;            // the super-chunks d_chunks holds
    std::vector<long long> first;              // and d_first
    long long n_tasks = 0;
    KSpaceLaunch launch;
};

KSpaceSums::KSpaceSums(int device) : impl_(new Impl) {
    impl_->device = device;
    check(cudaSetDevice(device), "cudaSetDevice");
    int optin = 0;
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute");
    impl_->smem_optin = static_cast<std::size_t>(optin);
    check(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
}

KSpaceSums::~KSpaceSums() {
    if (impl_ && impl_->stream) {
        cudaSetDevice(impl_->device);
        cudaStreamSynchronize(impl_->stream);
        cudaStreamDestroy(impl_->stream);
    }
}

int KSpaceSums::device() const { return impl_->device; }
const KSpaceLaunch& KSpaceSums::last_launch() const { return impl_->launch; }

void KSpaceSums::run(const double* s, std::size_t n_atoms, const std::int64_t* offsets, int n_species,
                     const std::shared_ptr<const kspace::Plan>& plan, double* acc) {
    Impl& d = *impl_;
    check(cudaSetDevice(d.device), "cudaSetDevice");
    const long long n_slots = static_cast<long long>(plan->slots.size());
    const int rows0 = plan->rows[0], rows1 = plan->rows[1], rows_total = rows0 + rows1 + plan->rows[2];
    if (rows_total > 65535)
        throw std::invalid_argument("n: indices too large for the GPU tables (more than 65535 rows); "
                                    "lower q_max or use device='cpu'");

    // tasks of the plan (kept while the same plan comes back)
    if (d.plan != plan) {
        std::vector<Task> tasks;
        for (const auto& g : plan->groups) {
            const int per = (g.m_count + kRegs - 1) / kRegs;  // threads of this group
            for (int t = 0; t < per; ++t)
                tasks.push_back(Task{g.n1, g.n2, g.n3c, g.m_count, static_cast<long long>(g.slot), t, per});
        }
        d.n_tasks = static_cast<long long>(tasks.size());
        d.d_tasks.reserve(tasks.size(), "the k-space tasks");
        check(cudaMemcpyAsync(d.d_tasks.ptr, tasks.data(), tasks.size() * sizeof(Task),
                              cudaMemcpyHostToDevice, d.stream), "cudaMemcpyAsync (tasks)");
        check(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
        d.plan = plan;
    }
    const long long task_blocks = (d.n_tasks + kThreads - 1) / kThreads;

    // super-chunks: atoms of one species, sized for ~kTargetBlocks blocks (problem-only choice)
    const long long n = static_cast<long long>(n_atoms);
    const long long want = std::max(1LL, (kTargetBlocks + task_blocks - 1) / task_blocks);
    long long sc_size = std::max(kMinSuperChunk, (n + want - 1) / want);
    sc_size = (sc_size + kMaxChunk - 1) / kMaxChunk * kMaxChunk;
    std::vector<SuperChunk> chunks;
    std::vector<long long> first(static_cast<std::size_t>(n_species) + 1, 0);
    for (;;) {
        chunks.clear();
        for (int a = 0; a < n_species; ++a) {
            first[static_cast<std::size_t>(a)] = static_cast<long long>(chunks.size());
            for (long long b = offsets[a]; b < offsets[a + 1]; b += sc_size)
                chunks.push_back(SuperChunk{b, std::min<long long>(b + sc_size, offsets[a + 1])});
        }
        first[static_cast<std::size_t>(n_species)] = static_cast<long long>(chunks.size());
        if (static_cast<double>(chunks.size()) * n_slots * 16.0 <= kMaxPartialBytes || sc_size >= n) break;
        sc_size *= 2;
    }
    const long long n_chunks = static_cast<long long>(chunks.size());

    // shared memory: chunk_atoms x stride double2 (stride odd: fewer bank conflicts on stores)
    const int stride = rows_total | 1;
    const std::size_t per_atom = static_cast<std::size_t>(stride) * sizeof(double2);
    std::size_t budget = 48 * 1024;
    if (per_atom > budget) budget = d.smem_optin;
    const int chunk_atoms = static_cast<int>(std::min<std::size_t>(kMaxChunk, budget / per_atom));
    if (chunk_atoms < 1)
        throw std::invalid_argument(
            "n: the k vectors need " + std::to_string(rows_total) + " table rows per atom, more "
            "than this GPU's shared memory holds; lower q_max or use device='cpu'");
    const std::size_t smem = static_cast<std::size_t>(chunk_atoms) * per_atom;
    if (smem > 48 * 1024)
        check(cudaFuncSetAttribute(sums_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)), "cudaFuncSetAttribute");

    const std::size_t table_elems = static_cast<std::size_t>(rows_total) * n_atoms;
    d.d_s.reserve(3 * n_atoms, "the fractional coordinates");
    d.d_tables.reserve(table_elems, "the k-space tables (atoms x table rows x 16 bytes)");
    d.d_partial.reserve(static_cast<std::size_t>(n_chunks * n_slots), "the partial k-space sums");
    d.d_acc.reserve(static_cast<std::size_t>(n_species * n_slots), "the k-space amplitudes");
    if (d.d_chunks.reserve(chunks.size(), "the super-chunks")) d.chunks.clear();
    if (d.d_first.reserve(first.size(), "the super-chunk offsets")) d.chunks.clear();
    d.h_s.reserve(3 * n_atoms, "pinned coordinates");
    d.h_acc.reserve(static_cast<std::size_t>(n_species * n_slots), "pinned amplitudes");

    std::memcpy(d.h_s.ptr, s, 3 * n_atoms * sizeof(double));
    check(cudaMemcpyAsync(d.d_s.ptr, d.h_s.ptr, 3 * n_atoms * sizeof(double), cudaMemcpyHostToDevice, d.stream),
          "cudaMemcpyAsync (coordinates)");
    // (the super-chunks of an analysis are the same every frame: uploaded when they change)
    const bool same_chunks = d.chunks.size() == chunks.size() && d.first == first &&
        std::equal(chunks.begin(), chunks.end(), d.chunks.begin(), [](const SuperChunk& x, const SuperChunk& y) {
            return x.begin == y.begin && x.end == y.end;
        });
    if (!same_chunks) {
        d.chunks.clear();  // (until the copies are done: a failure leaves nothing cached)
        check(cudaMemcpyAsync(d.d_chunks.ptr, chunks.data(), chunks.size() * sizeof(SuperChunk),
                              cudaMemcpyHostToDevice, d.stream), "cudaMemcpyAsync (super-chunks)");
        check(cudaMemcpyAsync(d.d_first.ptr, first.data(), first.size() * sizeof(long long),
                              cudaMemcpyHostToDevice, d.stream), "cudaMemcpyAsync (offsets)");
        check(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize (super-chunks)");
        d.chunks = chunks;
        d.first = first;
    }
    if (n_atoms > 0) {
        const dim3 tgrid(static_cast<unsigned>((n + 255) / 256), static_cast<unsigned>(rows_total));
        tables_kernel<<<tgrid, 256, 0, d.stream>>>(d.d_s.ptr, n, rows0, rows1, rows_total, d.d_tables.ptr);
        check(cudaGetLastError(), "tables_kernel launch");
    }
    if (n_chunks > 0 && d.n_tasks > 0) {
        // grid.y is limited to 65535: more super-chunks run in several launches
        for (long long c0 = 0; c0 < n_chunks; c0 += 65535) {
            const long long cn = std::min<long long>(65535, n_chunks - c0);
            const dim3 grid(static_cast<unsigned>(task_blocks), static_cast<unsigned>(cn));
            sums_kernel<<<grid, kThreads, smem, d.stream>>>(
                d.d_tasks.ptr, d.n_tasks, d.d_chunks.ptr + c0, d.d_tables.ptr, n, rows0, rows1,
                rows_total, stride, chunk_atoms, n_slots, d.d_partial.ptr + c0 * n_slots);
            check(cudaGetLastError(), "sums_kernel launch");
        }
    }
    const long long total = static_cast<long long>(n_species) * n_slots;
    reduce_kernel<<<static_cast<unsigned>((total * 32 + 255) / 256), 256, 0, d.stream>>>(
        d.d_partial.ptr, d.d_first.ptr, n_species, n_slots, d.d_acc.ptr);
    check(cudaGetLastError(), "reduce_kernel launch");
    check(cudaMemcpyAsync(d.h_acc.ptr, d.d_acc.ptr, static_cast<std::size_t>(total) * sizeof(double2),
                          cudaMemcpyDeviceToHost, d.stream), "cudaMemcpyAsync (amplitudes)");
    check(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize (k-space sums)");
    std::memcpy(acc, d.h_acc.ptr, static_cast<std::size_t>(total) * sizeof(double2));

    d.launch.tasks = d.n_tasks;
    d.launch.blocks = task_blocks * n_chunks;
    d.launch.chunk_atoms = chunk_atoms;
    d.launch.super_chunk = sc_size;
    d.launch.super_chunks = n_chunks;
    d.launch.table_bytes = table_elems * sizeof(double2);
}

}  // namespace gpu
}  // namespace fastrdf
