// The cell-list kernels (cells.hpp): their tasks and arguments, the launcher of the sort on
// the device (cells.cu) and the host launcher of every cell kernel variant (instantiated in
// cells_<box>.cu, one translation unit per box type, so that they compile in parallel).
#pragma once

#include <cuda_runtime.h>

#include "binning.cuh"
#include "common.cuh"
#include "filter.cuh"
#include "fastrdf/cuda.hpp"
#include "fastrdf/float_rule.cuh"
#include "fastrdf/geometry.hpp"
#include "instances.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

// Per frame, on the device: every atom gets its cell (assign_cells, in double, as on the
// CPU), each species block is counting-sorted by cell (count, scan_cells, scatter_cells; the
// order inside a cell depends on the atomics, which cannot change a count: the distance of
// (i, j) equals that of (j, i) bit for bit), then cell_kernel histograms. A block of
// cell_kernel takes one species pair, one column of cells and one neighbour column; it walks
// its column's atoms in chunks of kCellThreads (one per thread) and streams, for each chunk,
// the strip of neighbour cells along axis 2 that covers every cell of the chunk. Each
// unordered pair is looked at once: for a species with itself only neighbour columns of
// higher rank, and in its own column only j > i.

constexpr int kCellThreads = 128;
constexpr int kScanThreads = 1024;

struct CellTask {
    int pair, col, ncol, part;
};

struct CellFrame {
    int n[3];
    int k;
    int periodic;
    int n_species;
    int n_cells;
    double f[3][3];       // periodic: fractional coordinate d = f[d] . r
    double lo[3], side[3];  // no box: cell d = (r[d] - lo[d]) / side[d]
};

struct CellKernelArgs {
    const float4* atoms;  // sorted by cell within each species block
    const int* zcell;     // axis-2 cell of every sorted atom
    const int* start;     // n_species * (n_cells + 1)
    const CellTask* tasks;
    const int* pairs;     // 2 * n_pairs species
    unsigned long long* out;
    int nbins, copies, parts;
    int n2, k, periodic, n_cells;
    int chunk_images;            // as in KernelArgs
    unsigned long long* stats;   // as in KernelArgs
};

// Sorts the n atoms of a frame into the cells of grid g on `stream` (assign_cells, scan_cells,
// scatter_cells): the cell of every atom into cell_of, the first sorted index of every cell of
// every species into start (fill: scratch of the same size), the sorted atoms into sorted and
// the axis-2 cell of each into zcell. offsets32, rank: the species offsets and column ranks.
void sort_cells_on_device(const float4* atoms, int n, const CellFrame& g, const int* offsets32,
                          const int* rank, int* cell_of, int* start, int* fill, float4* sorted,
                          int* zcell, cudaStream_t stream);

// Launches the variant of cell_kernel that `launch` describes (shared or global; labels or
// not) over n_cell_tasks tasks on `stream`.
template <typename T, class Box, class Rule>
void launch_cells(const LaunchInfo& launch, const CellKernelArgs& a, const Box& box,
                  const Rule& rule, bool labels, long long n_cell_tasks, cudaStream_t stream);

#define FASTRDF_CELLS_LAUNCHER(T, Box, Rule)                                                   \
    void launch_cells<T, Box, Rule>(const LaunchInfo&, const CellKernelArgs&, const Box&,      \
                                    const Rule&, bool, long long, cudaStream_t)
// The launchers of box template B: every rule that Histogrammer::Impl::with_rule<T, false>
// hands them. EXTERN: `extern` (declarations, below) or nothing (cells_<box>.cu).
#define FASTRDF_CELLS_INSTANCES(EXTERN, B) \
    FASTRDF_RULE_INSTANCES(FASTRDF_CELLS_LAUNCHER, EXTERN, B)

FASTRDF_EXTERN_INSTANCES(FASTRDF_CELLS_INSTANCES, FASTRDF_CELLS_LAUNCHER)

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
