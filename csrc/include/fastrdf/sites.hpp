// Site-specific histograms (MDAnalysis's InterRDF_s): every (i, j) atom pair of two groups
// gets its own histogram, binned with InterRDF_s's own rule (not numpy.histogram's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fastrdf/kernel_api.hpp"

namespace fastrdf {
namespace cpu {

struct SitesProblem {
    const float* xyz1 = nullptr;  // (n1, 3) float32, prepared as MDAnalysis would (wrapped...)
    const float* xyz2 = nullptr;  // (n2, 3)
    std::size_t n1 = 0, n2 = 0;
    double rmin = 0, rmax = 0;
    int nbins = 0;
    FrameProblem box;              // only the box fields are used (box_kind, ortho, basis...)
    bool double_precision = true;
    int n_threads = 1;
    double* out = nullptr;         // (n1, n2, nbins) float64, accumulated into
};

// Adds one count to out[i, j, k] for every pair with distance r <= rmax and
// k = trunc((r - rmin) * nbins / (rmax - rmin)) in [0, nbins) -- InterRDF_s's rule, evaluated
// in double precision in that order (a distance just below rmin truncates to bin 0 there too).
void site_histograms(const SitesProblem& p);

}  // namespace cpu
}  // namespace fastrdf
