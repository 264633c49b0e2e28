// Cell grids for the cell-list kernels: planning (grid size, estimated cost) and sorting the
// atoms of a frame into cells. Compiled once (not per instruction set); see cells.hpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fastrdf/cells.hpp"
#include "fastrdf/kernel_api.hpp"

namespace fastrdf {

namespace {

// The CPU cost model, in units of one pair of the all-pairs kernel (~0.7 ns on one core of
// the 2-core Xeon): a row of the cell kernel costs kRowCost plus its length rounded up to
// whole 16-lane blocks; sorting costs kAtomCost per atom (fitted to k = 1, 2, 3 at 100k atoms
// and a sparse 5,000-atom box, benchmarks/NOTES.md "Cell lists").
constexpr double kRowCost = 80.0;
constexpr double kAtomCost = 40.0;

// Neighbour cells of c along an axis of n cells, reach k: deduplicated, ascending.
std::vector<int> axis_neighbours(int c, int n, int k, bool periodic) {
    std::vector<int> v;
    for (int o = -k; o <= k; ++o) {
        int d = c + o;
        if (periodic) {
            d %= n;
            if (d < 0) d += n;
        } else if (d < 0 || d >= n) {
            continue;
        }
        v.push_back(d);
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

// Mean number of neighbour cells (itself included) over the cells of an axis.
double mean_neighbours(int n, int k, bool periodic) {
    if (periodic) return std::min(n, 2 * k + 1);
    double s = 0;
    for (int c = 0; c < n; ++c) s += std::min(c + k, n - 1) - std::max(c - k, 0) + 1;
    return s / n;
}

// Appends the runs of consecutive values of the sorted list v as inclusive [lo, hi] pairs.
void append_runs(const std::vector<int>& v, std::vector<int32_t>& out) {
    for (std::size_t a = 0; a < v.size();) {
        std::size_t b = a;
        while (b + 1 < v.size() && v[b + 1] == v[b] + 1) ++b;
        out.push_back(v[a]);
        out.push_back(v[b]);
        a = b + 1;
    }
}

// Hilbert index of (x, y) on a 2^m x 2^m grid (the classic rotate-and-flip walk).
int64_t hilbert_index(int64_t side, int64_t x, int64_t y) {
    int64_t d = 0;
    for (int64_t s = side / 2; s > 0; s /= 2) {
        const int64_t rx = (x & s) > 0, ry = (y & s) > 0;
        d += s * s * ((3 * rx) ^ ry);
        if (ry == 0) {
            if (rx == 1) {
                x = side - 1 - x;
                y = side - 1 - y;
            }
            std::swap(x, y);
        }
    }
    return d;
}

int64_t morton_index(int64_t x, int64_t y) {
    int64_t d = 0;
    for (int b = 0; b < 31; ++b) d |= ((x >> b) & 1) << (2 * b + 1) | ((y >> b) & 1) << (2 * b);
    return d;
}

}  // namespace

std::vector<int32_t> column_ranks(int n0, int n1, int order) {
    const int64_t n = static_cast<int64_t>(n0) * n1;
    std::vector<int32_t> rank(n);
    if (order == kOrderRowMajor) {
        for (int64_t c = 0; c < n; ++c) rank[c] = static_cast<int32_t>(c);
        return rank;
    }
    int64_t side = 1;
    while (side < std::max(n0, n1)) side *= 2;
    std::vector<std::pair<int64_t, int32_t>> key(n);
    for (int c0 = 0; c0 < n0; ++c0)
        for (int c1 = 0; c1 < n1; ++c1) {
            const int64_t c = static_cast<int64_t>(c0) * n1 + c1;
            key[c] = {order == kOrderMorton ? morton_index(c0, c1) : hilbert_index(side, c0, c1),
                      static_cast<int32_t>(c)};
        }
    std::sort(key.begin(), key.end());
    for (int64_t r = 0; r < n; ++r) rank[key[r].second] = static_cast<int32_t>(r);
    return rank;
}

void column_neighbours(int n0, int n1, int k, bool periodic, const std::vector<int32_t>& rank,
                       std::vector<int32_t>& start, std::vector<int32_t>& nbr) {
    const int64_t n_cols = static_cast<int64_t>(n0) * n1;
    std::vector<int32_t> col_of_rank(n_cols);
    for (int64_t c = 0; c < n_cols; ++c) col_of_rank[rank[c]] = static_cast<int32_t>(c);
    start.assign(1, 0);
    nbr.clear();
    std::vector<std::vector<int>> nb0(n0), nb1(n1);
    for (int c = 0; c < n0; ++c) nb0[c] = axis_neighbours(c, n0, k, periodic);
    for (int c = 0; c < n1; ++c) nb1[c] = axis_neighbours(c, n1, k, periodic);
    std::vector<int32_t> list;
    for (int64_t r = 0; r < n_cols; ++r) {
        const int c0 = col_of_rank[r] / n1, c1 = col_of_rank[r] % n1;
        list.clear();
        for (int d0 : nb0[c0])
            for (int d1 : nb1[c1]) list.push_back(rank[d0 * n1 + d1]);
        std::sort(list.begin(), list.end());
        nbr.insert(nbr.end(), list.begin(), list.end());
        start.push_back(static_cast<int32_t>(nbr.size()));
    }
}

CellPlan plan_cells(const FrameProblem& p, int k, int order) {
    const int64_t n_atoms = p.offsets[p.n_species];
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    if (n_atoms > 0) {
        const float* c[3] = {p.x, p.y, p.z};
        for (int d = 0; d < 3; ++d) {
            const auto mm = std::minmax_element(c[d], c[d] + n_atoms);
            lo[d] = *mm.first;
            hi[d] = *mm.second;
        }
    }
    return plan_cells_best(p, k, order, lo, hi);
}

CellPlan plan_cells(const FrameProblem& p, int k, int order, const double lo[3], const double hi[3]) {
    CellPlan pl;
    pl.k = std::max(1, k);
    pl.order = order;
    const int64_t n_atoms = p.offsets[p.n_species];
    const double rmax = p.edges[p.nbins];
    pl.atoms = static_cast<double>(n_atoms);

    double scale = rmax;
    for (int d = 0; d < 3; ++d) scale = std::max({scale, std::fabs(lo[d]), std::fabs(hi[d])});

    // The largest number of cells worth having: a few per atom.
    const double max_cells = std::max(64.0, 2.0 * static_cast<double>(n_atoms));

    pl.periodic = p.box_kind != kNoBox;
    if (pl.periodic) {
        double w[3];
        for (int d = 0; d < 3; ++d) {
            if (is_triclinic_kind(p.box_kind)) {
                const double* f = p.reciprocal + 3 * d;
                w[d] = 1.0 / std::sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2]);
            } else {
                w[d] = p.ortho[d];
            }
            scale = std::max(scale, w[d]);
        }
        // Far above the float32 rounding of coordinates and distances (~1e-7 of scale).
        const double margin = 1e-5 * scale + 1e-6;
        double reach_d[3] = {rmax + margin, rmax + margin, rmax + margin};
        if (is_slab_kind(p.box_kind)) {
            // A counted pair's image d has |d_xy| <= rmax and |d_z| <= hz (with the 3D r2 also
            // |d| <= rmax): along the unit normal u_d of the cells' faces (f_d / |f_d|) it spans
            // |u_d . d| <= |u_xy| rmax + |u_z| hz, so the cells need only reach that far (along
            // z of an orthorhombic box: hz; in the plane: rmax).
            const double hz = p.slab_w == 1.0 ? std::min(p.slab_h, rmax) : p.slab_h;
            for (int d = 0; d < 3; ++d) {
                double u[3] = {0.0, 0.0, 0.0};
                if (is_triclinic_kind(p.box_kind)) {
                    for (int c = 0; c < 3; ++c) u[c] = p.reciprocal[3 * d + c] * w[d];
                } else {
                    u[d] = 1.0;
                }
                double span = std::sqrt(u[0] * u[0] + u[1] * u[1]) * rmax + std::fabs(u[2]) * hz;
                if (p.slab_w == 1.0) span = std::min(span, rmax);
                reach_d[d] = span + margin;
            }
        }
        double n[3];
        for (int d = 0; d < 3; ++d) n[d] = std::max(1.0, std::floor(pl.k * w[d] / reach_d[d]));
        const double total = n[0] * n[1] * n[2];
        if (total > max_cells) {
            const double f = std::cbrt(max_cells / total);
            for (int d = 0; d < 3; ++d) n[d] = std::max(1.0, std::floor(n[d] * f));
        }
        for (int d = 0; d < 3; ++d) pl.n[d] = static_cast<int>(n[d]);
    } else {
        const double reach = rmax + 1e-5 * scale + 1e-6;
        double side = reach / pl.k;
        auto cells_along = [&](int d) { return std::floor((hi[d] - lo[d]) / side) + 1.0; };
        // Sparse systems: grow the cells until the grid is no larger than max_cells.
        for (int it = 0; it < 200 && cells_along(0) * cells_along(1) * cells_along(2) > max_cells; ++it)
            side *= 1.1;
        for (int d = 0; d < 3; ++d) {
            pl.lo[d] = lo[d];
            pl.side[d] = side;
            pl.n[d] = static_cast<int>(std::min(cells_along(d), 1e6));
        }
    }

    // Work of both methods, for a uniform density.
    double frac = 1.0;
    double cols = 1.0;
    for (int d = 0; d < 3; ++d) {
        const double m = mean_neighbours(pl.n[d], pl.k, pl.periodic);
        frac *= m / pl.n[d];
        if (d < 2) cols *= m;
    }
    const double n_cells = static_cast<double>(pl.n[0]) * pl.n[1] * pl.n[2];
    const double strip = mean_neighbours(pl.n[2], pl.k, pl.periodic);
    pl.cell_cost = kAtomCost * pl.atoms;
    for (int q = 0; q < p.n_pairs; ++q) {
        const int a = p.pairs[2 * q], b = p.pairs[2 * q + 1];
        const double na = static_cast<double>(p.offsets[a + 1] - p.offsets[a]);
        const double nb = static_cast<double>(p.offsets[b + 1] - p.offsets[b]);
        const double lanes = 16.0 * std::ceil(strip * nb / n_cells / 16.0);
        double rows;
        if (a == b) {
            pl.allpairs_pairs += na * (na - 1) / 2;
            pl.cell_pairs += na * na / 2 * frac;
            rows = na * (cols + 1) / 2;
        } else {
            pl.allpairs_pairs += na * nb;
            pl.cell_pairs += na * nb * frac;
            rows = na * cols;
        }
        pl.cell_rows += rows;
        pl.cell_cost += rows * (kRowCost + lanes);
    }
    return pl;
}

CellPlan plan_cells_best(const FrameProblem& p, int k, int order, const double lo[3], const double hi[3]) {
    if (k > 0) return plan_cells(p, k, order, lo, hi);
    CellPlan best = plan_cells(p, 1, order, lo, hi);
    for (int kk = 2; kk <= 3; ++kk) {
        const CellPlan c = plan_cells(p, kk, order, lo, hi);
        if (c.cell_cost < best.cell_cost) best = c;
    }
    return best;
}

bool cells_pay(const CellPlan& pl) {
    return pl.n[0] * pl.n[1] * pl.n[2] > 1 && pl.cell_cost < pl.allpairs_pairs;
}

void build_cells(const FrameProblem& p, const CellPlan& pl, CellGrid& g) {
    g.k = pl.k;
    g.periodic = pl.periodic;
    if (g.order != pl.order || static_cast<int64_t>(g.rank.size()) != static_cast<int64_t>(pl.n[0]) * pl.n[1] ||
        g.n[0] != pl.n[0] || g.n[1] != pl.n[1])
        g.rank = column_ranks(pl.n[0], pl.n[1], pl.order);
    g.order = pl.order;
    for (int d = 0; d < 3; ++d) g.n[d] = pl.n[d];
    g.n_cells = static_cast<int64_t>(g.n[0]) * g.n[1] * g.n[2];
    const int64_t n_atoms = p.offsets[p.n_species];
    const int64_t stride = g.n_cells + 1;

    // Cell of every atom, computed in double from the float32 coordinates.
    g.cell_of.resize(n_atoms);
    g.image_of.assign(pl.periodic ? n_atoms : 0, 0);
    const int n0 = g.n[0], n1 = g.n[1], n2 = g.n[2];
    if (pl.periodic) {
        double f[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
        for (int d = 0; d < 3; ++d) {
            if (is_triclinic_kind(p.box_kind))
                for (int c = 0; c < 3; ++c) f[d][c] = p.reciprocal[3 * d + c];
            else
                f[d][d] = 1.0 / p.ortho[d];
        }
        for (int64_t i = 0; i < n_atoms; ++i) {
            const double r[3] = {p.x[i], p.y[i], p.z[i]};
            int c[3], key = 0;
            for (int d = 0; d < 3; ++d) {
                double s = f[d][0] * r[0] + f[d][1] * r[1] + f[d][2] * r[2];
                const double m = std::floor(s);
                s -= m;
                c[d] = std::min(g.n[d] - 1, static_cast<int>(s * g.n[d]));
                c[d] = std::max(c[d], 0);
                key = 5 * key + static_cast<int>(std::min(2.0, std::max(-2.0, m)) + 2.0);
            }
            g.cell_of[i] = static_cast<int64_t>(g.rank[c[0] * n1 + c[1]]) * n2 + c[2];
            g.image_of[i] = static_cast<uint8_t>(key);
        }
    } else {
        for (int64_t i = 0; i < n_atoms; ++i) {
            const double r[3] = {p.x[i], p.y[i], p.z[i]};
            int c[3];
            for (int d = 0; d < 3; ++d) {
                c[d] = static_cast<int>((r[d] - pl.lo[d]) / pl.side[d]);
                c[d] = std::min(std::max(c[d], 0), g.n[d] - 1);
            }
            g.cell_of[i] = static_cast<int64_t>(g.rank[c[0] * n1 + c[1]]) * n2 + c[2];
        }
    }

    // Counting sort of each species block by cell (stable: atoms keep their order in a cell);
    // periodic boxes first sort by image (stable), so that a cell's atoms come by image.
    g.start.assign(static_cast<std::size_t>(p.n_species) * stride, 0);
    // kRowPad readable elements past the end (kernel_api.hpp)
    g.x.resize(n_atoms + kRowPad);
    g.y.resize(n_atoms + kRowPad);
    g.z.resize(n_atoms + kRowPad);
    g.labels.resize(p.labels ? n_atoms + kRowPad : 0);
    g.image.resize(pl.periodic ? n_atoms : 0);
    g.fill.resize(g.n_cells);
    g.by_image.resize(pl.periodic ? n_atoms : 0);
    constexpr int kImages = 125;  // 5^3 image keys
    for (int s = 0; s < p.n_species; ++s) {
        int64_t* st = g.start.data() + s * stride;
        const int64_t a0 = p.offsets[s], a1 = p.offsets[s + 1];
        if (pl.periodic) {
            int64_t count[kImages + 1] = {};
            for (int64_t i = a0; i < a1; ++i) ++count[g.image_of[i] + 1];
            count[0] = a0;
            for (int m = 0; m < kImages; ++m) count[m + 1] += count[m];
            for (int64_t i = a0; i < a1; ++i) g.by_image[count[g.image_of[i]]++] = i;
        }
        for (int64_t i = a0; i < a1; ++i) ++st[g.cell_of[i] + 1];
        st[0] = a0;
        for (int64_t c = 0; c < g.n_cells; ++c) st[c + 1] += st[c];
        std::copy(st, st + g.n_cells, g.fill.begin());
        for (int64_t a = a0; a < a1; ++a) {
            const int64_t i = pl.periodic ? g.by_image[a] : a;
            const int64_t dst = g.fill[g.cell_of[i]]++;
            g.x[dst] = p.x[i];
            g.y[dst] = p.y[i];
            g.z[dst] = p.z[i];
            if (p.labels) g.labels[dst] = p.labels[i];
            if (pl.periodic) g.image[dst] = g.image_of[i];
        }
    }

    column_neighbours(n0, n1, g.k, g.periodic, g.rank, g.col_start, g.col_nbr);

    // Strips along axis 2.
    g.full_start.assign(1, 0);
    g.after_start.assign(1, 0);
    g.full.clear();
    g.after.clear();
    for (int c = 0; c < n2; ++c) {
        const std::vector<int> v = axis_neighbours(c, n2, g.k, g.periodic);
        append_runs(v, g.full);
        std::vector<int> later;
        for (int d : v)
            if (d > c) later.push_back(d);
        append_runs(later, g.after);
        g.full_start.push_back(static_cast<int32_t>(g.full.size() / 2));
        g.after_start.push_back(static_cast<int32_t>(g.after.size() / 2));
    }
}

}  // namespace fastrdf
