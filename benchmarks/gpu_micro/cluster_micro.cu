// Micro-benchmark: wide histograms (50k-200k bins) in the distributed shared memory of a
// thread-block cluster (Hopper, sm_90). Each block of a cluster of CS blocks holds nbins / CS
// uint32 counters (bin k lives in block k % CS, word k / CS); every pair increments its bin with
// one `red.shared::cluster.add.u32`, local or remote. Compared with the same loop and a plain
// local window (CS = 1, which only fits up to ~57k bins) to see what a remote increment costs.
// Same pairs as pair_micro.cu: N_I x N_J random points in a 100 A cube, no box, every pair
// binned, 2 i atoms per thread.
//   hash   a cheap pseudo-random bin (3 integer ops): the increment's own ceiling
//   exact  the production FloatRule (fastrdf/float_rule.cuh)
// nvcc -std=c++17 -O3 -arch=sm_90 --fmad=false -I../../csrc/include cluster_micro.cu -o cluster_micro
// ./cluster_micro [nbins...]
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "fastrdf/float_rule.cuh"
#include "micro_common.cuh"

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t map_rank(uint32_t shared_addr, uint32_t rank) {
  uint32_t r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(shared_addr), "r"(rank)); return r;
}

template <bool Exact, int CS, int T, int R>
__global__ void __launch_bounds__(T) kern(const float4* __restrict__ a, int ni, const float4* __restrict__ b, int nj,
                                          fastrdf::gpu::FloatRule<> rule, int nbins, unsigned long long* out, int jper) {
  extern __shared__ __align__(16) unsigned char smem[];
  float4* jt = reinterpret_cast<float4*>(smem);
  uint32_t* hist = reinterpret_cast<uint32_t*>(jt + T);
  const int words = (nbins + CS - 1) / CS;
  for (int k = threadIdx.x; k < words; k += T) hist[k] = 0;
  const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(hist));
  uint32_t base[CS];
#pragma unroll
  for (int c = 0; c < CS; ++c) base[c] = CS == 1 ? local : map_rank(local, c);
  if (CS > 1) cluster_sync(); else __syncthreads();
  float4 ai[R];
  all_pairs<T, R>(a, ni, b, nj, jt, jper, ai, [&](const float4& aj, int r) {
    int bin;
    bool in = true;
    if (!Exact) {
      bin = hash_bin(aj, ai[r], nbins);
    } else {
      const float dx = __fadd_rn(aj.x, -ai[r].x), dy = __fadd_rn(aj.y, -ai[r].y),
                  dz = __fadd_rn(aj.z, -ai[r].z);
      const float r2 = __fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz));
      in = rule(r2, bin);
    }
    if (CS == 1) {
      if (in) asm volatile("red.shared.add.u32 [%0], 1;" :: "r"(local + 4u * bin) : "memory");
    } else {
      const uint32_t owner = static_cast<uint32_t>(bin) % CS;
      const uint32_t off = static_cast<uint32_t>(bin) / CS;
      uint32_t addr = base[0];
#pragma unroll
      for (int c = 1; c < CS; ++c) addr = owner == c ? base[c] : addr;
      if (in) asm volatile("red.shared::cluster.add.u32 [%0], 1;" :: "r"(addr + 4u * off) : "memory");
    }
  });
  if (CS > 1) cluster_sync(); else __syncthreads();
  const uint32_t me = CS == 1 ? 0 : cluster_rank();
  for (int k = threadIdx.x; k < words; k += T) {
    const int bin = k * CS + me;
    if (bin < nbins && hist[k]) atomicAdd(out + bin, (unsigned long long)hist[k]);
  }
}

int main(int argc, char** argv) {
  const int ni = 1 << 18, nj = 1 << 20;
  float4 *da, *db; unsigned long long* dout;
  random_points(ni, nj, &da, &db);
  int dev; cudaDeviceProp prop; CK(cudaGetDevice(&dev)); CK(cudaGetDeviceProperties(&prop, dev));
  printf("# %s, %d SMs, %zu B shared per block max\n", prop.name, prop.multiProcessorCount, prop.sharedMemPerBlockOptin);
  std::vector<int> bins_list = {50000, 100000, 200000};
  if (argc > 1) { bins_list.clear(); for (int i = 1; i < argc; ++i) bins_list.push_back(atoi(argv[i])); }
  printf("| rule | cluster | threads | nbins | kB/block | ms | bapps | checksum |\n|---|---|---|---|---|---|---|---|\n");
  for (int nbins : bins_list) {
    const float rmax = 175.f;
    fastrdf::gpu::FloatRule<> rule{0.f, rmax * rmax, 0.f, (float)(nbins / (double)rmax), nbins - 1};
    CK(cudaMalloc(&dout, nbins * 8));
    auto run = [&](auto kernel, const char* name, int cs, int T, int R) {
      const size_t smem = T * 16 + (size_t)((nbins + cs - 1) / cs) * 4;
      if (smem > prop.sharedMemPerBlockOptin) { printf("| %s | %d | %d | %d | %zu | - | does not fit | |\n", name, cs, T, nbins, smem / 1024); return; }
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
      if (cs > 1) CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      const int jper = 8192;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((ni + T * R - 1) / (T * R), (nj + jper - 1) / jper);
      cfg.blockDim = dim3(T);
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = cs; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
      cfg.attrs = at; cfg.numAttrs = 1;
      int nclusters = 0;
      if (cs > 1) { CK(cudaOccupancyMaxActiveClusters(&nclusters, kernel, &cfg)); }
      const MicroTiming t = time_launches([&] {
        CK(cudaLaunchKernelEx(&cfg, kernel, (const float4*)da, ni, (const float4*)db, nj, rule, nbins, dout, jper));
      }, dout, nbins);
      const double pairs = (double)ni * nj;
      printf("| %s | %d (%d active) | %d | %d | %zu | %.2f | %.0f | %llu/%llu |\n", name, cs, nclusters, T, nbins,
             smem / 1024, t.ms, pairs / t.ms / 1e6, t.sum, t.weighted);
      fflush(stdout);
    };
    run(kern<false, 1, 1024, 2>, "hash", 1, 1024, 2);
    run(kern<false, 2, 1024, 2>, "hash", 2, 1024, 2);
    run(kern<false, 4, 512, 2>, "hash", 4, 512, 2);
    run(kern<false, 4, 1024, 2>, "hash", 4, 1024, 2);
    run(kern<true, 1, 1024, 2>, "exact", 1, 1024, 2);
    run(kern<true, 2, 1024, 2>, "exact", 2, 1024, 2);
    run(kern<true, 4, 512, 2>, "exact", 4, 512, 2);
    run(kern<true, 4, 1024, 2>, "exact", 4, 1024, 2);
    run(kern<true, 8, 1024, 2>, "exact", 8, 1024, 2);
    cudaFree(dout);
  }
  return 0;
}
