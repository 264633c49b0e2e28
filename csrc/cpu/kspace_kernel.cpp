// CPU kernel of the direct k-space sum (kspace.hpp): compiled once per instruction set
// (FASTRDF_ISA), like the histogram kernel, and chosen with it at run time.
//
// Work: atoms in blocks of kBlock within one species. Each block's per-axis tables
// e_c(n) = exp(i 2 pi n s_c), n = 0 .. max|n_c| (sin/cos of the angle every kSeed rows,
// without branches (trig.hpp); the complex recurrence e(n) = e(n - 1) e(1) between them) are
// built once, by one thread, for a batch of blocks; then each thread, for each of its
// (n1, n2) groups, forms the product p = e1(n1) e2(n2) e3(n3c) and, for m = 0, 1, ... (two
// at a time), the four real sums over the block (kspace.hpp). The lanes are GCC/Clang vectors of four doubles: AVX2 runs
// one instruction per operation, the SSE2 baseline two; the sums of every m keep the same
// order of operations in any variant (four lane accumulators over the block, added as
// (l0 + l1) + (l2 + l3)), so every variant and every thread count give the same bits.
// Threads own contiguous ranges of groups (each group's slots are written by one thread) and
// add the blocks in their fixed order: no reduction across threads.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fastrdf/cpu.hpp"
#include "fastrdf/kspace.hpp"
#include "fastrdf/trig.hpp"

#ifndef FASTRDF_ISA
#error "FASTRDF_ISA must name the instruction-set variant"
#endif

namespace fastrdf {
namespace cpu {
namespace FASTRDF_ISA {

namespace {

#ifndef FASTRDF_KSPACE_BLOCK
#define FASTRDF_KSPACE_BLOCK 128
#endif
// Atoms per block (a fixed constant: the result's rounding depends on it, never on threads).
// The sums over a block end in horizontal additions and updates of the slots, so larger blocks
// amortise them; the block's tables (16 kBlock bytes a row, ~130 rows at |k| <= 3.2 / A in an
// 80 A box: 260 kB) stay in L2. Measured on the 2-core EPYC (benchmarks/NOTES.md, 2026-11-25):
// 32 atoms 3.9, 64 5.6, 128 6.0, 256 6.3 G k-atom terms/s per core.
constexpr int kBlock = FASTRDF_KSPACE_BLOCK;
constexpr int kLanes = 4;
constexpr int kVecs = kBlock / kLanes;
#ifndef FASTRDF_KSPACE_BATCH  // (a tuning knob, like FASTRDF_KSPACE_BLOCK)
#define FASTRDF_KSPACE_BATCH 4
#endif
// Blocks per thread whose tables are built before the sums that use them
constexpr std::size_t kBatch = FASTRDF_KSPACE_BATCH;
constexpr int kSeed = 16;  // sin/cos directly every kSeed rows (the recurrence's drift bound)

typedef double v4d __attribute__((vector_size(32)));

inline double hsum(const v4d& v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// 32-byte aligned storage of n vectors (std::vector<v4d> is not: its allocation functions are
// shared across the variants' translation units, and a type of vector attribute is no safe
// template argument)
struct AlignedVecs {
    std::vector<double> buf;
    v4d* ptr = nullptr;
    explicit AlignedVecs(std::size_t n) : buf(kLanes * n + kLanes, 0.0) {
        auto a = reinterpret_cast<std::uintptr_t>(buf.data());
        a = (a + 31) & ~static_cast<std::uintptr_t>(31);
        ptr = reinterpret_cast<v4d*>(a);
    }
};

struct BlockRef {
    int species;
    std::size_t begin;
    int count;
};

// Tables of one block: rows of kVecs vectors, axis 0 rows first, then axis 1, then axis 2.
void build_tables(const double* s, const BlockRef& b, const int rows[3], v4d* re, v4d* im) {
    int row0 = 0;
    for (int c = 0; c < 3; ++c) {
        double sc[kBlock], wr[kBlock], wi[kBlock];
        for (int j = 0; j < kBlock; ++j) sc[j] = j < b.count ? s[3 * (b.begin + j) + c] : 0.0;
        double* r = reinterpret_cast<double*>(re + static_cast<std::size_t>(row0) * kVecs);
        double* i = reinterpret_cast<double*>(im + static_cast<std::size_t>(row0) * kVecs);
        for (int j = 0; j < kBlock; ++j) {
            r[j] = 1.0;
            i[j] = 0.0;
        }
        if (rows[c] > 1) {
#pragma omp simd
            for (int j = 0; j < kBlock; ++j) trig::sincos_turns(sc[j], wi[j], wr[j]);
        }
        for (int n = 1; n < rows[c]; ++n) {
            double* rn = r + static_cast<std::size_t>(n) * kBlock;
            double* in = i + static_cast<std::size_t>(n) * kBlock;
            if (n == 1) {
                for (int j = 0; j < kBlock; ++j) {
                    rn[j] = wr[j];
                    in[j] = wi[j];
                }
            } else if (n % kSeed == 0) {
#pragma omp simd
                for (int j = 0; j < kBlock; ++j) trig::sincos_turns(n * sc[j], in[j], rn[j]);
            } else {
                const double* rp = rn - kBlock;
                const double* ip = in - kBlock;
                for (int j = 0; j < kBlock; ++j) {
                    rn[j] = rp[j] * wr[j] - ip[j] * wi[j];
                    in[j] = rp[j] * wi[j] + ip[j] * wr[j];
                }
            }
        }
        row0 += rows[c];
    }
}

// acc[2 slot] etc.: the slots of +m and -m of one m, from the four sums
inline void add_pair(double* acc, double rr, double ii, double ri, double ir) {
    acc[0] += rr - ii;  // +m
    acc[1] += ri + ir;
    acc[2] += rr + ii;  // -m
    acc[3] += ir - ri;
}

// p = e1(n1) e2(n2) e3(n3c) of one group for the block's atoms (e(-n) = conj(e(n))). Most
// groups of an orthorhombic box have n3c = 0 (their n3 run from -h to h), where e3 = 1: that
// product is skipped (the same values: x 1 - y 0 = x).
void group_product(const kspace::Plan& plan, const kspace::Group& G, const v4d* tre,
                   const v4d* tim, v4d* pr, v4d* pi) {
    const v4d* r1 = tre + static_cast<std::size_t>(std::abs(G.n1)) * kVecs;
    const v4d* i1 = tim + static_cast<std::size_t>(std::abs(G.n1)) * kVecs;
    const std::size_t o2 = static_cast<std::size_t>(plan.rows[0] + std::abs(G.n2)) * kVecs;
    const v4d* r2 = tre + o2;
    const v4d* i2 = tim + o2;
    const double s1 = G.n1 < 0 ? -1.0 : 1.0, s2 = G.n2 < 0 ? -1.0 : 1.0;
    if (G.n3c == 0) {
        for (int q = 0; q < kVecs; ++q) {
            const v4d a = r1[q], bi = s1 * i1[q], c = r2[q], d = s2 * i2[q];
            pr[q] = a * c - bi * d;
            pi[q] = a * d + bi * c;
        }
        return;
    }
    const std::size_t oc = static_cast<std::size_t>(plan.rows[0] + plan.rows[1] + std::abs(G.n3c)) * kVecs;
    const v4d* r3 = tre + oc;
    const v4d* i3 = tim + oc;
    const double s3 = G.n3c < 0 ? -1.0 : 1.0;
    for (int q = 0; q < kVecs; ++q) {
        const v4d a = r1[q], bi = s1 * i1[q], c = r2[q], d = s2 * i2[q];
        const v4d xr = a * c - bi * d, xi = a * d + bi * c;  // e1 e2
        const v4d e = r3[q], f = s3 * i3[q];                 // e3(n3c)
        pr[q] = xr * e - xi * f;
        pi[q] = xr * f + xi * e;
    }
}

// The sums of groups g0 .. g1 - 1 over blocks b0 .. b1 - 1, whose tables (table vectors
// each, re then im) start at tables + 2 table (b - b0)
void sum_groups(const KSpaceProblem& p, const std::vector<BlockRef>& blocks, std::size_t b0,
                std::size_t b1, const v4d* tables, std::size_t table, std::size_t g0,
                std::size_t g1) {
    const kspace::Plan& plan = *p.plan;
    if (g0 >= g1) return;
    alignas(32) v4d pr[kVecs], pi[kVecs];
    const std::int64_t n_slots = static_cast<std::int64_t>(plan.slots.size());
    const std::int64_t* slots = plan.slots.data();
    for (std::size_t k = b0; k < b1; ++k) {
        const BlockRef& b = blocks[k];
        const v4d* tre = tables + 2 * table * (k - b0);
        const v4d* tim = tre + table;
        double* acc_species = p.acc + 2 * static_cast<std::int64_t>(b.species) * n_slots;
        for (std::size_t g = g0; g < g1; ++g) {
            const kspace::Group& G = plan.groups[g];
            group_product(plan, G, tre, tim, pr, pi);
            if (b.count < kBlock) {  // atoms past the block's end: p = 0
                double* prd = reinterpret_cast<double*>(pr);
                double* pid = reinterpret_cast<double*>(pi);
                for (int j = b.count; j < kBlock; ++j) prd[j] = pid[j] = 0.0;
            }
            const std::size_t o3 = static_cast<std::size_t>(plan.rows[0] + plan.rows[1]) * kVecs;
            const std::int64_t* gs = slots + G.slot;
            double* acc = acc_species + 2 * G.slot;
            int m = 0;
            for (; m + 1 < G.m_count; m += 2) {
                const bool need0 = gs[2 * m] >= 0 || gs[2 * m + 1] >= 0;
                const bool need1 = gs[2 * m + 2] >= 0 || gs[2 * m + 3] >= 0;
                if (!need0 && !need1) continue;
                const v4d* ca = tre + o3 + static_cast<std::size_t>(m) * kVecs;
                const v4d* da = tim + o3 + static_cast<std::size_t>(m) * kVecs;
                const v4d* cb = ca + kVecs;
                const v4d* db = da + kVecs;
                v4d rr0 = {0, 0, 0, 0}, ii0 = rr0, ri0 = rr0, ir0 = rr0;
                v4d rr1 = rr0, ii1 = rr0, ri1 = rr0, ir1 = rr0;
                for (int q = 0; q < kVecs; ++q) {
                    const v4d x = pr[q], y = pi[q];
                    const v4d c0 = ca[q], d0 = da[q], c1 = cb[q], d1 = db[q];
                    rr0 += x * c0;
                    ii0 += y * d0;
                    ri0 += x * d0;
                    ir0 += y * c0;
                    rr1 += x * c1;
                    ii1 += y * d1;
                    ri1 += x * d1;
                    ir1 += y * c1;
                }
                add_pair(acc + 4 * m, hsum(rr0), hsum(ii0), hsum(ri0), hsum(ir0));
                add_pair(acc + 4 * m + 4, hsum(rr1), hsum(ii1), hsum(ri1), hsum(ir1));
            }
            if (m < G.m_count && (gs[2 * m] >= 0 || gs[2 * m + 1] >= 0)) {
                const v4d* ca = tre + o3 + static_cast<std::size_t>(m) * kVecs;
                const v4d* da = tim + o3 + static_cast<std::size_t>(m) * kVecs;
                v4d rr0 = {0, 0, 0, 0}, ii0 = rr0, ri0 = rr0, ir0 = rr0;
                for (int q = 0; q < kVecs; ++q) {
                    const v4d x = pr[q], y = pi[q];
                    rr0 += x * ca[q];
                    ii0 += y * da[q];
                    ri0 += x * da[q];
                    ir0 += y * ca[q];
                }
                add_pair(acc + 4 * m, hsum(rr0), hsum(ii0), hsum(ri0), hsum(ir0));
            }
        }
    }
}

}  // namespace

void kspace_sums(const KSpaceProblem& p) {
    const kspace::Plan& plan = *p.plan;
    std::vector<BlockRef> blocks;
    for (int a = 0; a < p.n_species; ++a)
        for (std::int64_t j = p.offsets[a]; j < p.offsets[a + 1]; j += kBlock)
            blocks.push_back({a, static_cast<std::size_t>(j),
                              static_cast<int>(std::min<std::int64_t>(kBlock, p.offsets[a + 1] - j))});
    const std::size_t n_groups = plan.groups.size();
    // contiguous ranges of groups of about equal work (m_count sums + the product p)
    const int n_threads = std::max(1, std::min<int>(p.n_threads, static_cast<int>(n_groups)));
    std::vector<std::size_t> bounds(static_cast<std::size_t>(n_threads) + 1, n_groups);
    bounds[0] = 0;
    double total = 0;
    for (const auto& g : plan.groups) total += g.m_count + 2.0;
    double run = 0;
    int t = 1;
    for (std::size_t g = 0; g < n_groups && t < n_threads; ++g) {
        run += plan.groups[g].m_count + 2.0;
        if (run >= total * t / n_threads) bounds[static_cast<std::size_t>(t++)] = g + 1;
    }
    for (; t < n_threads; ++t) bounds[static_cast<std::size_t>(t)] = n_groups;
    // The tables of a batch of blocks are built first, each by one thread (every thread the
    // blocks t, t + T, ...), then every thread adds its groups over the batch's blocks in
    // order: each table is built once whatever the thread count (a thread of its own per
    // block repeated that work on every thread). A batch is kBatch blocks a thread.
    const std::size_t table = static_cast<std::size_t>(plan.rows[0] + plan.rows[1] + plan.rows[2]) * kVecs;
    const std::size_t batch = kBatch * static_cast<std::size_t>(n_threads);
    AlignedVecs tables(2 * table * std::min(batch, blocks.size()));
    for (std::size_t b0 = 0; b0 < blocks.size(); b0 += batch) {
        const std::size_t b1 = std::min(blocks.size(), b0 + batch);
        const int builders = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(n_threads), b1 - b0));
        parallel_run(builders, [&](int tid) {
            for (std::size_t k = b0 + static_cast<std::size_t>(tid); k < b1; k += static_cast<std::size_t>(builders)) {
                v4d* tre = tables.ptr + 2 * table * (k - b0);
                build_tables(p.s, blocks[k], plan.rows, tre, tre + table);
            }
        });
        parallel_run(n_threads, [&](int tid) {
            const auto k = static_cast<std::size_t>(tid);
            sum_groups(p, blocks, b0, b1, tables.ptr, table, bounds[k], bounds[k + 1]);
        });
    }
}

}  // namespace FASTRDF_ISA
}  // namespace cpu
}  // namespace fastrdf
