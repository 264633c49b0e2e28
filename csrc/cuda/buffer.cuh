// Device and pinned host allocations of the engine.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "common.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

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

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
