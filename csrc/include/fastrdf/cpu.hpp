// Host-side API of the CPU kernels: variant dispatch and machine facts.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>
#include <unistd.h>

#include "fastrdf/kernel_api.hpp"

namespace fastrdf {
namespace cpu {

using KernelFn = void (*)(const FrameProblem&, Workspace&);

std::vector<std::string> compiled_variants();
std::vector<std::string> usable_variants();
std::string default_variant();
KernelFn kernel_for(const std::string& isa);
std::size_t l2_cache_bytes();

// CPUs this process may run on.
int hardware_threads();
// Runs fn(tid), tid = 0 .. n_threads - 1, on a fork-aware thread pool (tid 0 on the caller)
// and returns when every call has returned.
void parallel_run(int n_threads, const std::function<void(int)>& fn);

// Move every position into the primary cell in float32 with the same arithmetic as
// MDAnalysis's distance code (so that distances, and thus counts, agree with InterRDF).
// box: three box vectors as rows (float32, lower triangular as MDAnalysis makes them).
void wrap_ortho(float* xyz, std::size_t n, const float box[3]);
void wrap_triclinic(float* xyz, std::size_t n, const float box[9]);

// Triclinic boxes with extra images (has_extra_images, geometry.hpp), n pairs at once: r2[j]
// of atom i at (xi, yi, zi) and atom j at (xs[j], ys[j], zs[j]) with the shift `shift` for
// every pair (null: each pair's own, dist2's), bit for bit reduce(d, s) / dist2. norm()'s loop
// over the images inside a loop over pairs keeps that loop scalar, so this takes the
// displacement in the centred cell of every pair (into cx, cy, cz), then the least r2 over the
// images image by image across the pairs: norm()'s comparisons in its order for each pair,
// and every loop vectorises (the pair kernel's blocks of 16, the site kernel's rows).
template <class Box, typename T>
inline void extra_image_r2(const Box& box, const float* xs, const float* ys, const float* zs,
                           float xi, float yi, float zi, std::size_t n, const T* shift,
                           T* __restrict cx, T* __restrict cy, T* __restrict cz,
                           T* __restrict r2) {
    const bool own = shift == nullptr;
    const T s0 = own ? T(0) : shift[0], s1 = own ? T(0) : shift[1], s2 = own ? T(0) : shift[2];
#pragma omp simd
    for (std::size_t j = 0; j < n; ++j) {
        const T dx = static_cast<T>(xs[j] - xi);
        const T dy = static_cast<T>(ys[j] - yi);
        const T dz = static_cast<T>(zs[j] - zi);
        T nn[3], s[3];
        box.index(dx, dy, dz, nn);
        box.shift(nn, s);
        cx[j] = dx - (own ? s[0] : s0);
        cy[j] = dy - (own ? s[1] : s1);
        cz[j] = dz - (own ? s[2] : s2);
        r2[j] = box.metric(cx[j], cy[j], cz[j]);
    }
    for (int m = 0; m < box.n_images; ++m) {
        const T ix = box.images[3 * m], iy = box.images[3 * m + 1], iz = box.images[3 * m + 2];
#pragma omp simd
        for (std::size_t j = 0; j < n; ++j) {
            const T d2 = box.metric(cx[j] - ix, cy[j] - iy, cz[j] - iz);
            r2[j] = d2 < r2[j] ? d2 : r2[j];
        }
    }
}

}  // namespace cpu
}  // namespace fastrdf
