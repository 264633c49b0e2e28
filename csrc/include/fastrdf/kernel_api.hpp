// The interface between the engine (bindings) and the compiled kernels of one frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fastrdf {

// One frame's work: every requested species pair of one coordinate block.
struct FrameProblem {
    // Coordinates of all species, structure of arrays, species s at [offsets[s], offsets[s+1]).
    const float* x = nullptr;
    const float* y = nullptr;
    const float* z = nullptr;
    const int32_t* labels = nullptr;  // per-atom exclusion labels (pairs with equal labels skip) or null
    const int64_t* offsets = nullptr;
    int n_species = 0;
    const int32_t* pairs = nullptr;   // 2 * n_pairs species indices (a, b)
    int n_pairs = 0;

    const double* edges = nullptr;    // nbins + 1, numpy.histogram's edges
    int nbins = 0;

    int box_kind = 0;                 // BoxKind
    double ortho[3] = {0, 0, 0};      // orthorhombic lengths
    float ortho_inv32[3] = {0, 0, 0}; // float(1 / L), for kOrthoScaled (set by the caller: a
                                      // float round trip in one expression can be folded away
                                      // by GCC 12's SLP vectoriser)
    double basis[9] = {0};            // triclinic reduced basis (rows)
    double reciprocal[9] = {0};       // triclinic reciprocal vectors (rows)
    const double* images = nullptr;   // triclinic extra images (3 * n_images)
    int n_images = 0;

    bool double_precision = false;
    int n_threads = 1;
    std::size_t l2_bytes = 1 << 20;

    uint64_t* out = nullptr;          // n_pairs * nbins, accumulated into
};

// Reusable per-engine buffers, so no frame allocates once sizes are stable.
struct Workspace {
    std::vector<uint32_t> thread_hist;
    std::vector<uint32_t> thread_idx;  // one index buffer per thread
    std::vector<uint64_t> thread_since_flush;
    std::vector<int64_t> tasks;  // 5 ints per task: pair, i0, i1, j0, j1
    std::vector<float> edges_f;
    std::vector<float> images_f;
};

namespace cpu {
#define FASTRDF_DECLARE_ISA(isa) \
    namespace isa { void histogram_frame(const FrameProblem& p, Workspace& ws); }
FASTRDF_DECLARE_ISA(baseline)
FASTRDF_DECLARE_ISA(avx2)
FASTRDF_DECLARE_ISA(avx512)
FASTRDF_DECLARE_ISA(native)
#undef FASTRDF_DECLARE_ISA

// Cache-blocking tile edge from CADISHI Eq. 6 (../shared/papers/000_250f7fd1161c6543.txt):
//   L2 - reserve = 4 bs^2 + 2 * coord_bytes * bs + 4 * nbins, solved for bs.
std::size_t block_size(std::size_t l2_bytes, int nbins, int n_pairs);
}  // namespace cpu

}  // namespace fastrdf
