// Device queries (cuda.hpp): the devices this process can use and what they offer.
#include <cuda_runtime.h>

#include <string>

#include "common.cuh"
#include "fastrdf/cuda.hpp"

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
