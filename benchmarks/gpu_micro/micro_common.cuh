// What the GPU micro-benchmarks (pair_micro.cu, cluster_micro.cu) share: the error check,
// the random points, the cheap pseudo-random bin and the all-pairs loop, which has the shape
// of the production kernel's (i atoms in registers, j atoms streamed through shared memory).
#pragma once

#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

// A pseudo-random bin in [0, nbins) from the pair's coordinates (3 integer operations).
__device__ __forceinline__ int hash_bin(const float4& aj, const float4& ai, int nbins) {
  const uint32_t h = (__float_as_uint(aj.x) ^ __float_as_uint(ai.y)) * 2654435761u;
  return static_cast<int>(__umulhi(h, static_cast<uint32_t>(nbins)));
}

// R i atoms per thread (blocks of T threads, tile blockIdx.x) against the j atoms
// [blockIdx.y * jper, + jper) streamed through jt (T float4 of shared memory): pair(aj, r)
// for every pair, with the thread's i atoms in ai.
template <int T, int R, class F>
__device__ __forceinline__ void all_pairs(const float4* __restrict__ a, int ni, const float4* __restrict__ b,
                                          int nj, float4* jt, int jper, float4 (&ai)[R], F&& pair) {
  const int i0 = blockIdx.x * T * R;
#pragma unroll
  for (int r = 0; r < R; ++r) ai[r] = a[min(i0 + threadIdx.x + r * T, ni - 1)];
  const int j0 = blockIdx.y * jper, j1 = min(nj, j0 + jper);
  for (int jb = j0; jb < j1; jb += T) {
    __syncthreads();
    jt[threadIdx.x] = b[min(jb + threadIdx.x, nj - 1)];
    __syncthreads();
    const int n = min(T, j1 - jb);
    for (int k = 0; k < n; ++k) {
      const float4 aj = jt[k];
#pragma unroll
      for (int r = 0; r < R; ++r) pair(aj, r);
    }
  }
}

// Times `launch` (one warm-up launch, then the mean of three) into the nbins uint64 counts at
// dout, and gives the counts' sum and bin-weighted sum per launch (checksums of the histogram).
struct MicroTiming {
  float ms;
  unsigned long long sum, weighted;
};
template <class Launch>
inline MicroTiming time_launches(Launch&& launch, unsigned long long* dout, int nbins) {
  CK(cudaMemset(dout, 0, nbins * 8));
  launch();  // warm
  CK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  CK(cudaMemset(dout, 0, nbins * 8));
  cudaEventRecord(e0);
  const int reps = 3;
  for (int r = 0; r < reps; ++r) launch();
  cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  std::vector<unsigned long long> h(nbins);
  CK(cudaMemcpy(h.data(), dout, nbins * 8, cudaMemcpyDeviceToHost));
  unsigned long long s = 0, w = 0; for (int k = 0; k < nbins; ++k) { s += h[k]; w += h[k] * (k + 1); }
  return MicroTiming{ms / reps, s / reps, w / reps};
}

// ni and nj random points in a 100 A cube (seed 1), copied to the device.
inline void random_points(int ni, int nj, float4** da, float4** db) {
  std::vector<float4> ha(ni), hb(nj);
  srand(1);
  auto rnd = [] { return 100.0f * (rand() / (float)RAND_MAX); };
  for (auto& p : ha) p = make_float4(rnd(), rnd(), rnd(), 0.f);
  for (auto& p : hb) p = make_float4(rnd(), rnd(), rnd(), 0.f);
  CK(cudaMalloc(da, ni * 16)); CK(cudaMalloc(db, nj * 16));
  CK(cudaMemcpy(*da, ha.data(), ni * 16, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(*db, hb.data(), nj * 16, cudaMemcpyHostToDevice));
}
