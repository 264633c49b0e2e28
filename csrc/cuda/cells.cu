// The sort of a frame into cells on the device (cells.hpp): the cell of every atom (in double,
// as on the CPU), a count and a scan per species, and a scatter with atomics.
#include <cuda_runtime.h>

#include <cstddef>

#include "cells.cuh"
#include "common.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

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

void sort_cells_on_device(const float4* atoms, int n, const CellFrame& g, const int* offsets32,
                          const int* rank, int* cell_of, int* start, int* fill, float4* sorted,
                          int* zcell, cudaStream_t stream) {
    const std::size_t len = static_cast<std::size_t>(g.n_species) * (g.n_cells + 1);
    check(cudaMemsetAsync(start, 0, len * sizeof(int), stream), "cudaMemsetAsync");
    const int blocks = (n + 255) / 256;
    if (n > 0) {
        assign_cells<<<blocks, 256, 0, stream>>>(atoms, n, offsets32, rank, g, cell_of, start);
        check(cudaGetLastError(), "the cell assignment kernel");
    }
    scan_cells<<<g.n_species, kScanThreads, 0, stream>>>(start, fill, offsets32, g.n_cells);
    check(cudaGetLastError(), "the cell scan kernel");
    if (n > 0) {
        scatter_cells<<<blocks, 256, 0, stream>>>(atoms, n, offsets32, g.n_species, g.n_cells,
                                                  cell_of, g.n[2], fill, sorted, zcell);
        check(cudaGetLastError(), "the cell scatter kernel");
    }
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
