// Device queries (cuda.hpp): the devices this process can use and what they offer.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.cuh"
#include "fastrdf/cuda.hpp"
#include "fastrdf/float_rule.cuh"

namespace fastrdf {
namespace gpu {

using detail::check;
using detail::error_text;

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

namespace {

// Every positive normal float x (bit patterns 0x00800000 .. 0x7F7FFFFF): the largest
// |sqrt_approx(x) - sqrt(x)| / sqrt(x), the double root correctly rounded (relative error
// 2^-53, covered by the caller's margin). Non-negative doubles order as their bit patterns, so
// the maximum is an integer atomicMax.
__global__ void sqrt_error_kernel(unsigned long long* worst) {
    constexpr uint32_t lo = 0x00800000u, hi = 0x7F800000u;
    double mine = 0.0;
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t b = lo + blockIdx.x * blockDim.x + threadIdx.x; b < hi; b += stride) {
        const float x = __uint_as_float(b);
        const double s = sqrt(static_cast<double>(x));
        const float y = sqrt_approx(x);
        const double e = fabs(static_cast<double>(y) - s) / s;
        // (a NaN or negative root counts as error 1: a NaN e would never win the maximum)
        mine = !(y >= 0.f) ? 1.0 : e > mine ? e : mine;
    }
    for (int o = 16; o > 0; o >>= 1) mine = fmax(mine, __shfl_xor_sync(0xFFFFFFFFu, mine, o));
    if ((threadIdx.x & 31) == 0) atomicMax(worst, static_cast<unsigned long long>(__double_as_longlong(mine)));
}

}  // namespace

double sqrt_approx_error(int device) {
    static std::mutex lock;
    static std::vector<double> known;  // per device; < 0: not measured yet
    std::lock_guard<std::mutex> guard(lock);
    if (device < 0) throw std::invalid_argument("sqrt_approx_error: device must be >= 0");
    if (known.size() <= static_cast<std::size_t>(device)) known.resize(device + 1, -1.0);
    if (known[device] >= 0.0) return known[device];
    int previous = 0;
    check(cudaGetDevice(&previous), "cudaGetDevice");
    check(cudaSetDevice(device), "cudaSetDevice");
    unsigned long long* dev = nullptr;
    check(cudaMalloc(&dev, sizeof(unsigned long long)), "cudaMalloc(sqrt check)");
    unsigned long long bits = 0;
    cudaError_t e = cudaMemset(dev, 0, sizeof(bits));
    if (e == cudaSuccess) {
        sqrt_error_kernel<<<1024, 256>>>(dev);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(&bits, dev, sizeof(bits), cudaMemcpyDeviceToHost);
    cudaFree(dev);
    cudaSetDevice(previous);
    check(e, "the square-root check");
    double worst;
    std::memcpy(&worst, &bits, sizeof(worst));
    known[device] = worst;
    return worst;
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

}  // namespace gpu
}  // namespace fastrdf
