// Cell lists: the atoms of a frame sorted into a grid of cells, so that a kernel visits only
// the atom pairs of neighbouring cells (O(N) work at fixed r_max and density) instead of all
// pairs.
//
// The grid. Periodic boxes are cut along the fractional coordinates of the box's reduced basis
// (box_setup.hpp): n_c cells along axis c, with n_c = floor(k * w_c / (r_max + delta)), w_c the
// distance between opposite faces of the cell and delta a safety margin far above rounding, so
// that two atoms within r_max lie in cells at most k apart in every axis (mod n_c). Without a
// box the grid covers the bounding box of the atoms, with cells of side (r_max + delta) / k.
// The grid only chooses which pairs are *looked at*: their distance and bin come from the same
// box arithmetic (geometry.hpp) as in the all-pairs kernels, on the same coordinates, so both
// give the same histogram bit for bit (see docs/design.rst, section "Cell grids: neighbours
// and pairs met once").
//
// Layout (row-major, axis 2 fastest). Each species keeps its block [offsets[s], offsets[s+1])
// of the frame, sorted by cell. Because axis 2 is fastest, the 2k + 1 cells along axis 2 around
// a cell are contiguous in memory: one "strip" (two when it wraps round a periodic edge) is one
// row of the kernel, so an atom meets its neighbours in (2k + 1)^2 rows, not (2k + 1)^3.
//
// Column order. The columns (cells of axes 0 and 1) are laid out in memory, and taken by the
// threads, in one of three orders: row-major, Morton (Z-order) or Hilbert. Space-filling
// curves keep neighbouring columns close in memory (I. Al-Kharusi & D. W. Walker, Int. J. High
// Perform. Comput. Appl. 33, 998 (2019), doi:10.1177/1094342019846282); within a column
// axis 2 stays contiguous, so the strips survive any column order.
//
// Each atom pair is visited once. For a species with itself: the neighbour columns (axes 0, 1)
// of column C with index > C are visited in full; in C itself only the cells after the atom's
// own along axis 2 ("after" strips), and within the own cell the atoms after it; duplicate
// neighbours (n_c <= 2k) are removed (see docs/design.rst, section "Cell grids: neighbours
// and pairs met once").
#pragma once

#include <cstdint>
#include <vector>

namespace fastrdf {

struct FrameProblem;

enum CellOrder : int { kOrderRowMajor = 0, kOrderMorton = 1, kOrderHilbert = 2 };

// Rank of every column (c0 * n1 + c1) in the given order: a permutation of 0 .. n0 * n1 - 1.
std::vector<int32_t> column_ranks(int n0, int n1, int order);

// Neighbour columns (by rank, deduplicated, ascending) of every column in rank order, as CSR:
// those of rank r are nbr[start[r] .. start[r + 1]).
void column_neighbours(int n0, int n1, int k, bool periodic, const std::vector<int32_t>& rank,
                       std::vector<int32_t>& start, std::vector<int32_t>& nbr);

struct CellGrid {
    int n[3] = {1, 1, 1};  // cells along each axis (axis 2 fastest)
    int k = 1;             // cells per r_max: neighbours are up to k cells away
    bool periodic = false;
    int order = kOrderRowMajor;
    int64_t n_cells = 1;   // cell (c0, c1, c2) is number rank[c0 * n1 + c1] * n2 + c2
    std::vector<int32_t> rank;

    // start[s * (n_cells + 1) + c]: first (absolute, sorted) index of species s in cell c.
    std::vector<int64_t> start;
    // The frame's coordinates and labels in sorted order (same species blocks as the frame).
    std::vector<float> x, y, z;
    std::vector<int32_t> labels;
    // Periodic boxes: the lattice image each sorted atom lies in (its fractional coordinates'
    // integer parts, each clamped to [-2, 2], as one number), the order within a cell. Runs
    // of equal image keep the bounds of a cell's atoms tight (histogram.cpp, certify_blocks)
    // when a trajectory is wrapped into another unit cell than the grid's (e.g. GROMACS's
    // compact dodecahedron).
    std::vector<uint8_t> image;

    // Neighbour columns (by rank) of every column (by rank), deduplicated, ascending; CSR.
    std::vector<int32_t> col_start, col_nbr;
    // For every cell index along axis 2, the inclusive ranges [lo, hi] of neighbour cells
    // (deduplicated, ascending, merged): all of them ("full") and those after it ("after").
    std::vector<int32_t> full_start, full;
    std::vector<int32_t> after_start, after;

    // scratch
    std::vector<int64_t> cell_of;
    std::vector<int64_t> fill;
    std::vector<uint8_t> image_of;
    std::vector<int64_t> by_image;
};

// Grid dimensions and the estimated cost of both methods, without sorting anything.
struct CellPlan {
    int n[3] = {1, 1, 1};
    int k = 1;
    int order = kOrderRowMajor;
    bool periodic = false;
    double lo[3] = {0, 0, 0};    // no box: lower corner of the grid
    double side[3] = {1, 1, 1};  // no box: cell sides
    double allpairs_pairs = 0;   // pairs the all-pairs kernel computes
    double cell_pairs = 0;       // pairs the cell kernel computes (uniform density estimate)
    double cell_rows = 0;        // rows (strips) the cell kernel runs
    double atoms = 0;            // atoms to sort into cells
    double cell_cost = 0;        // CPU cost of the cell kernel, in all-pairs pair times
};

// Plans a grid with k cells per r_max for the frame p whose coordinates span [lo, hi] per axis.
CellPlan plan_cells(const FrameProblem& p, int k, int order, const double lo[3], const double hi[3]);
// The same, with the bounds taken from p.x, p.y, p.z; k = 0: the k of 1, 2, 3 with the lowest
// CPU cost (cell_cost).
CellPlan plan_cells(const FrameProblem& p, int k, int order);
// k = 0: the cheapest of k = 1, 2, 3 on the CPU; otherwise plan_cells.
CellPlan plan_cells_best(const FrameProblem& p, int k, int order, const double lo[3], const double hi[3]);

// True when the CPU cell kernel is expected to be faster than the all-pairs kernel.
bool cells_pay(const CellPlan& plan);

// Sorts the frame into the planned grid (g's coordinates and labels are the sorted copy).
void build_cells(const FrameProblem& p, const CellPlan& plan, CellGrid& g);

}  // namespace fastrdf
