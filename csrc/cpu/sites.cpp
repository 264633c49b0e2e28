// Site-specific histograms for InterRDF_s: one histogram per (i, j) atom pair.
//
// The distance is the same minimum-image distance as the pair kernel's (geometry.hpp, in
// float or double); the bin follows MDAnalysis's InterRDF_s, which does not use
// numpy.histogram but k = int64((r - rmin) * nbins / (rmax - rmin)) on the pairs that
// capped_distance returns (r <= rmax), counting those with 0 <= k < nbins. Rows i are split
// among threads in chunks; each (i, j) owns its histogram, so threads never share a bin.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "fastrdf/cpu.hpp"
#include "fastrdf/geometry.hpp"
#include "fastrdf/sites.hpp"

namespace fastrdf {
namespace cpu {

namespace {

template <typename T, class Box>
void run_rows(const SitesProblem& p, const Box& box) {
    const std::size_t n1 = p.n1, n2 = p.n2;
    const int nbins = p.nbins;
    const double rmin = p.rmin, rmax = p.rmax, nb = static_cast<double>(nbins);
    const double width = rmax - rmin;
    const T rmax_t = static_cast<T>(rmax);
    std::vector<float> x2(n2), y2(n2), z2(n2);
    for (std::size_t j = 0; j < n2; ++j) {
        x2[j] = p.xyz2[3 * j];
        y2[j] = p.xyz2[3 * j + 1];
        z2[j] = p.xyz2[3 * j + 2];
    }
    std::atomic<std::size_t> next{0};
    const std::size_t chunk = std::max<std::size_t>(1, std::min<std::size_t>(64, n1 / (8 * p.n_threads) + 1));
    parallel_run(p.n_threads, [&](int) {
        std::vector<T> r(n2);
        std::vector<T> c[3];  // extra images: the displacements in the centred cell
        if (has_extra_images<Box>)
            for (auto& v : c) v.resize(n2);
        for (;;) {
            const std::size_t i0 = next.fetch_add(chunk);
            if (i0 >= n1) break;
            const std::size_t i1 = std::min(n1, i0 + chunk);
            for (std::size_t i = i0; i < i1; ++i) {
                const float xi = p.xyz1[3 * i], yi = p.xyz1[3 * i + 1], zi = p.xyz1[3 * i + 2];
                const Box b = box;
                if constexpr (has_extra_images<Box>) {
                    // the least r2 over the extra images across the row (cpu.hpp)
                    T* __restrict rr = r.data();
                    extra_image_r2(b, x2.data(), y2.data(), z2.data(), xi, yi, zi, n2,
                                   static_cast<const T*>(nullptr), c[0].data(), c[1].data(),
                                   c[2].data(), rr);
#pragma omp simd
                    for (std::size_t j = 0; j < n2; ++j) rr[j] = std::sqrt(rr[j]);
                } else {
#pragma omp simd
                    for (std::size_t j = 0; j < n2; ++j) {
                        r[j] = std::sqrt(pair_dist2(b, xi, yi, zi, x2[j], y2[j], z2[j]));
                    }
                }
                double* row = p.out + i * n2 * static_cast<std::size_t>(nbins);
                for (std::size_t j = 0; j < n2; ++j) {
                    if (!(r[j] <= rmax_t)) continue;
                    const double v = (static_cast<double>(r[j]) - rmin) * nb / width;
                    const int64_t k = static_cast<int64_t>(v);
                    if (k >= 0 && k < nbins) row[j * nbins + k] += 1.0;
                }
            }
        }
    });
}

template <typename T>
void run_precision(const SitesProblem& p) {
    std::vector<T> images(3 * static_cast<std::size_t>(p.box.n_images));
    for (std::size_t k = 0; k < images.size(); ++k) images[k] = static_cast<T>(p.box.images[k]);
    with_box<T, false>(p.box, images.data(), [&](const auto& box) { run_rows<T>(p, box); });
}

}  // namespace

void site_histograms(const SitesProblem& p) {
    if (p.n1 == 0 || p.n2 == 0) return;
    if (p.double_precision)
        run_precision<double>(p);
    else
        run_precision<float>(p);
}

}  // namespace cpu
}  // namespace fastrdf
