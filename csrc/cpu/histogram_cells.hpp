// Cell lists: the tasks are the columns of cells of every species pair.
// A part of histogram.cpp (histogram_part.hpp).
#pragma once
#include "histogram_part.hpp"

// Cell lists (cells.hpp): a task is one species pair and one column of cells (axes 0, 1) of
// its first species; each atom of the column meets the strips of its neighbour columns.
template <typename T, class Box, bool Labels, bool Exact, class S>
void run_cells(const FrameProblem& p, Workspace& ws, const Box& box, const Binning<T>& bin,
               const S* settle, T filter) {
    const CellGrid& g = ws.grid;
    FrameProblem q = p;  // the rows read the sorted copy
    q.x = g.x.data();
    q.y = g.y.data();
    q.z = g.z.data();
    q.labels = Labels ? g.labels.data() : nullptr;
    const int64_t n_cols = static_cast<int64_t>(g.n[0]) * g.n[1];
    const int n2 = g.n[2];
    const int64_t stride = g.n_cells + 1;
    // The longest row: 2k + 1 cells of axis 2 (or all of them).
    int64_t row_len = 1;
    for (int s = 0; s < p.n_species; ++s) {
        const int64_t* st = g.start.data() + s * stride;
        for (int64_t col = 0; col < n_cols; ++col)
            for (int z = 0; z < n2; ++z)
                for (int r = g.full_start[z]; r < g.full_start[z + 1]; ++r)
                    row_len = std::max(row_len, st[col * n2 + g.full[2 * r + 1] + 1] -
                                                    st[col * n2 + g.full[2 * r]]);
    }
    // Periodic boxes: the blocks of 16 j atoms of a strip take one image for all rows of a
    // cell when their bounds prove it (certify_blocks): most blocks of a cell grid do.
    constexpr bool kPeriodic = !std::is_same<Box, NoBox<T>>::value;
    // triclinic boxes: f[k] . x of every sorted atom, and the largest |coordinate| per axis
    const int64_t n_atoms = p.offsets[p.n_species];
    double xmax[3] = {0.0, 0.0, 0.0};
    const double* proj = nullptr;
    if constexpr (is_triclinic<Box>) {
        ws.projections.resize(static_cast<std::size_t>(3 * n_atoms));
        for (int64_t a = 0; a < n_atoms; ++a) {
            for (int k = 0; k < 3; ++k) ws.projections[3 * a + k] = box.projection(k, q.x[a], q.y[a], q.z[a]);
            xmax[0] = std::max(xmax[0], std::fabs(double(q.x[a])));
            xmax[1] = std::max(xmax[1], std::fabs(double(q.y[a])));
            xmax[2] = std::max(xmax[2], std::fabs(double(q.z[a])));
        }
        proj = ws.projections.data();
    }
    run_threads<T, Box, Labels, Exact>(q, ws, box, bin, settle, filter,
                                       static_cast<std::size_t>(row_len), p.n_pairs * n_cols,
                                       [&](auto& th, int64_t t) {
        thread_local std::vector<BlockImage<T>> blocks;
        uint64_t kinds[3] = {0, 0, 0};
        const int pair = static_cast<int>(t / n_cols);
        const int64_t col = t % n_cols;
        const int a = p.pairs[2 * pair], b = p.pairs[2 * pair + 1];
        const bool same = a == b;
        const int64_t* sa = g.start.data() + a * stride + col * n2;
        const int64_t* sb_all = g.start.data() + b * stride;
        for (int32_t m = g.col_start[col]; m < g.col_start[col + 1]; ++m) {
            const int64_t ncol = g.col_nbr[m];
            if (same && ncol < col) continue;
            const bool own = ncol == col;
            const int32_t* rs = (same && own) ? g.after_start.data() : g.full_start.data();
            const int32_t* rv = (same && own) ? g.after.data() : g.full.data();
            const int64_t* sb = sb_all + ncol * n2;
            for (int z = 0; z < n2; ++z) {
                const int64_t i0 = sa[z], i1 = sa[z + 1];
                if (i0 == i1) continue;
                // Periodic boxes: the cell's atoms by image (cell_grid.cpp sorts them so), each
                // run with the bounds of its atoms for certify_blocks; else one run.
                for (int64_t r0 = i0; r0 < i1;) {
                    int64_t r1 = i1;
                    AtomBounds rows;
                    if constexpr (kPeriodic) {
                        r1 = r0 + 1;
                        while (r1 < i1 && g.image[r1] == g.image[r0]) ++r1;
                        rows.take(q.x, q.y, q.z, proj, r0, r1);
                    }
                    for (int32_t r = rs[z]; r < rs[z + 1]; ++r) {
                        const int64_t j0 = sb[rv[2 * r]], j1 = sb[rv[2 * r + 1] + 1];
                        if (j0 == j1) continue;
                        const BlockImage<T>* bi = nullptr;
                        if constexpr (kPeriodic) {
                            blocks.resize(static_cast<std::size_t>((j1 - j0) / kDummySlots + 1));
                            certify_blocks<T>(box, q.x, q.y, q.z, proj, xmax, j0, j1, rows,
                                              blocks.data(), kinds);
                            bi = blocks.data();
                        }
                        th.rows(pair, r0, r1, static_cast<uint64_t>(j1 - j0), [&](int64_t i) {
                            th.row(pair, i, j0, static_cast<int>(j1 - j0), bi);
                        });
                    }
                    r0 = r1;
                }
                if (same && own) {  // the atoms after i in its own cell
                    th.rows(pair, i0, i1 - 1, static_cast<uint64_t>(i1 - i0 - 1), [&](int64_t i) {
                        th.row(pair, i, i + 1, static_cast<int>(i1 - i - 1));
                    });
                }
            }
        }
        for (int k = 0; k < 3; ++k)
            if (kinds[k]) ws.block_images[k].fetch_add(kinds[k], std::memory_order_relaxed);
    });
}
