// Spatial order of a frame for the periodic all-pairs kernels (host code): a counting sort by
// Morton code, spatial_sort.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "spatial_sort.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

namespace {

uint32_t spread_bits3(uint32_t v) {  // bits 0..9 of v to bits 0, 3, 6, ...
    v &= 0x3FFu;
    v = (v | (v << 16)) & 0x030000FFu;
    v = (v | (v << 8)) & 0x0300F00Fu;
    v = (v | (v << 4)) & 0x030C30C3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}

}  // namespace

void sort_spatially(const float4* in, float4* out, const int64_t* offsets, int n_species,
                    const float lo[3], const float hi[3], std::vector<uint32_t>& key,
                    std::vector<uint32_t>& count) {
    for (int sp = 0; sp < n_species; ++sp) {
        const int64_t o0 = offsets[sp], o1 = offsets[sp + 1], n = o1 - o0;
        if (n <= kChunk) {
            std::copy(in + o0, in + o1, out + o0);
            continue;
        }
        const int b = std::clamp(static_cast<int>(std::lround(std::log2(std::cbrt(n / 2.0)))), 1, 7);
        const uint32_t g = 1u << b;
        float scale[3];
        for (int d = 0; d < 3; ++d) {
            const float ext = hi[d] - lo[d];
            scale[d] = ext > 1e-30f ? static_cast<float>(g) / ext : 0.f;  // finite
        }
        auto cell = [&](float x, int d) {
            const float c = (x - lo[d]) * scale[d];  // in [0, g]; g itself for x == hi
            return std::min(static_cast<uint32_t>(std::max(c, 0.f)), g - 1);
        };
        key.resize(static_cast<std::size_t>(n));
        count.assign((std::size_t(1) << (3 * b)) + 1, 0u);
        for (int64_t i = 0; i < n; ++i) {
            const float4 v = in[o0 + i];
            const uint32_t k = spread_bits3(cell(v.x, 0)) | (spread_bits3(cell(v.y, 1)) << 1) |
                               (spread_bits3(cell(v.z, 2)) << 2);
            key[i] = k;
            ++count[k + 1];
        }
        for (std::size_t c = 1; c < count.size(); ++c) count[c] += count[c - 1];
        for (int64_t i = 0; i < n; ++i) out[o0 + count[key[i]]++] = in[o0 + i];
    }
}

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
