// Direct k-space sums A_a(k) = sum_{j in species a} exp(i k . r_j): the host-side maths shared
// by the CPU kernel (csrc/cpu/kspace*.cpp) and the CUDA kernel (csrc/cuda/kspace.cu).
//
// k = 2 pi (n1 a* + n2 b* + n3 c*) for integer n, so k . r = 2 pi n . s with the fractional
// coordinates s = r B^-1 (B: box vectors as rows). exp(i 2 pi n_c s_c) depends on s_c modulo 1,
// so s is taken in [-1/2, 1/2] (exactly: s - rint(s)), which keeps every phase small.
// A = sum_j e1(n1) e2(n2) e3(n3) with e_c(n) = exp(i 2 pi n s_c), e_c(-n) = conj(e_c(n)).
//
// The k vectors are grouped by (n1, n2): one product p_j = e1(n1) e2(n2) per atom serves every
// n3 of the group, and n3 = +m and -m come from the same four real sums
//   Srr = sum pr cr, Sii = sum pi ci, Sri = sum pr ci, Sir = sum pi cr   (c = e3(m))
//   A(+m) = (Srr - Sii) + i (Sri + Sir),  A(-m) = (Srr + Sii) + i (Sir - Sri),
// (with n3 = n3c +- m around the middle n3c of the group, e3(n3c) folded into p),
// four multiplications and four additions per atom for two k vectors. docs/design.rst,
// "Direct k-space sum", has the derivation and the error bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fastrdf {
namespace kspace {

// The k vectors of one (n1, n2), around n3 = n3c (the middle of the group's n3 range, so that
// +m and -m are both wanted in a triclinic box too): slots[slot + 2 m] is the index (in the
// caller's list) of (n1, n2, n3c + m), slots[slot + 2 m + 1] that of (n1, n2, n3c - m) (m = 0:
// -1), -1 where not asked for. The kernels fold e3(n3c) into the product p.
struct Group {
    int n1 = 0, n2 = 0, n3c = 0;
    int m_count = 0;         // m = 0 .. m_count - 1
    std::int64_t slot = 0;   // first of its 2 m_count slots
};

struct Plan {
    std::vector<Group> groups;        // sorted by (n1, n2)
    std::vector<std::int64_t> slots;  // 2 per m of every group
    std::vector<std::pair<std::int64_t, std::int64_t>> duplicates;  // (index, index it repeats)
    int rows[3] = {1, 1, 1};          // table rows per axis (axis 3: max of |n3c| + 1, m_count)
    std::int64_t n_vectors = 0;
};

// Largest |n_c| accepted: the tables hold max|n_c| + 1 rows per axis and atom block.
constexpr int kMaxIndex = 1 << 20;

inline Plan make_plan(const std::int32_t* n, std::int64_t count) {
    Plan plan;
    plan.n_vectors = count;
    for (std::int64_t k = 0; k < 3 * count; ++k)
        if (n[k] > kMaxIndex || n[k] < -kMaxIndex)
            throw std::invalid_argument("n: indices must lie within +-" + std::to_string(kMaxIndex));
    std::vector<std::int64_t> order(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) order[static_cast<std::size_t>(i)] = i;
    const auto key = [n](std::int64_t i) { return std::make_tuple(n[3 * i], n[3 * i + 1], n[3 * i + 2], i); };
    std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return key(a) < key(b); });
    std::int64_t slot = 0;
    for (std::size_t lo = 0; lo < order.size();) {
        const std::int32_t* first = n + 3 * order[lo];
        std::size_t hi = lo;
        while (hi < order.size() && n[3 * order[hi]] == first[0] && n[3 * order[hi] + 1] == first[1]) ++hi;
        Group g;
        g.n1 = first[0];
        g.n2 = first[1];
        const int n3_lo = first[2], n3_hi = n[3 * order[hi - 1] + 2];
        g.n3c = n3_lo + (n3_hi - n3_lo) / 2;
        g.m_count = std::max(n3_hi - g.n3c, g.n3c - n3_lo) + 1;
        g.slot = slot;
        plan.rows[0] = std::max(plan.rows[0], std::abs(g.n1) + 1);
        plan.rows[1] = std::max(plan.rows[1], std::abs(g.n2) + 1);
        plan.rows[2] = std::max({plan.rows[2], g.m_count, std::abs(g.n3c) + 1});
        plan.slots.resize(static_cast<std::size_t>(slot + 2 * g.m_count), -1);
        std::int64_t run_first = -1;  // the first index of a run of equal vectors
        for (std::size_t k = lo; k < hi; ++k) {
            const std::int64_t i = order[k];
            if (k > lo && n[3 * i + 2] == n[3 * order[k - 1] + 2]) {  // a repeated vector
                plan.duplicates.emplace_back(i, run_first);
                continue;
            }
            run_first = i;
            const int d = n[3 * i + 2] - g.n3c;
            plan.slots[static_cast<std::size_t>(slot + 2 * std::abs(d) + (d < 0 ? 1 : 0))] = i;
        }
        slot += 2 * g.m_count;
        plan.groups.push_back(g);
        lo = hi;
    }
    return plan;
}

// Inverse of the box matrix (rows a, b, c), so that s = r inv. Throws std::invalid_argument
// when the box is not finite or has (numerically) zero volume.
inline void invert_box(const double* m, double* inv) {
    for (int k = 0; k < 9; ++k)
        if (!std::isfinite(m[k])) throw std::invalid_argument("box_vectors: must be finite");
    const double c00 = m[4] * m[8] - m[5] * m[7];
    const double c01 = m[5] * m[6] - m[3] * m[8];
    const double c02 = m[3] * m[7] - m[4] * m[6];
    const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
    double la = 0, lb = 0, lc = 0;
    for (int k = 0; k < 3; ++k) {
        la += m[k] * m[k];
        lb += m[3 + k] * m[3 + k];
        lc += m[6 + k] * m[6 + k];
    }
    const double scale = std::sqrt(la) * std::sqrt(lb) * std::sqrt(lc);
    if (!(std::fabs(det) > 1e-12 * scale) || !std::isfinite(det))
        throw std::invalid_argument(
            "box_vectors: the box has zero volume (its three vectors are linearly dependent "
            "or zero); pass the rows a, b, c of a periodic cell, e.g. "
            "MDAnalysis.lib.mdamath.triclinic_vectors(ts.dimensions)");
    const double r = 1.0 / det;
    inv[0] = c00 * r;
    inv[3] = c01 * r;
    inv[6] = c02 * r;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) * r;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) * r;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) * r;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) * r;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) * r;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) * r;
}

// rint(v) (round to nearest, ties to even: the default rounding mode) without a library
// call where the build has no rounding instruction (x86-64's baseline, which the bindings
// are compiled for, lacks SSE4.1's roundsd): for |v| < 2^51, v + 1.5 2^52 lies in [2^52,
// 2^53), where the doubles are the integers, so the addition rounds v to an integer exactly
// as rint does and the subtraction is exact. (IEEE arithmetic: the build has no fast-math.)
inline double round_to_integer(double v) {
    constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
    if (std::fabs(v) < 2251799813685248.0) return (v + kMagic) - kMagic;  // |v| < 2^51
    return std::rint(v);  // (integers from 2^52 on; NaN)
}

// Fractional coordinates s = r inv of n atoms, in [-1/2, 1/2] (s - rint(s), exact), into
// s (n x 3). Returns false when a position is not finite.
template <typename T>
inline bool fractional(const T* xyz, std::size_t n, const double* inv, double* s) {
    bool finite = true;
    for (std::size_t j = 0; j < n; ++j) {
        const double x = xyz[3 * j], y = xyz[3 * j + 1], z = xyz[3 * j + 2];
        finite &= std::isfinite(x) & std::isfinite(y) & std::isfinite(z);
        for (int c = 0; c < 3; ++c) {
            const double v = x * inv[c] + y * inv[3 + c] + z * inv[6 + c];
            s[3 * j + c] = v - round_to_integer(v);
        }
    }
    return finite;
}

// The amplitudes of the slots (acc: n_species x n_slots complex, interleaved) into the caller's
// order (out: n_species x n_vectors complex).
inline void scatter(const Plan& plan, int n_species, const double* acc, double* out) {
    const std::int64_t n_slots = static_cast<std::int64_t>(plan.slots.size());
    const std::int64_t m = plan.n_vectors;
    for (int a = 0; a < n_species; ++a) {
        const double* src = acc + 2 * a * n_slots;
        double* dst = out + 2 * a * m;
        for (std::int64_t s = 0; s < n_slots; ++s) {
            const std::int64_t i = plan.slots[static_cast<std::size_t>(s)];
            if (i < 0) continue;
            dst[2 * i] = src[2 * s];
            dst[2 * i + 1] = src[2 * s + 1];
        }
        for (const auto& d : plan.duplicates) {
            dst[2 * d.first] = dst[2 * d.second];
            dst[2 * d.first + 1] = dst[2 * d.second + 1];
        }
    }
}

}  // namespace kspace

namespace cpu {

// One call of the CPU kernel: the sums of every slot of `plan` for the atoms of each species.
struct KSpaceProblem {
    const double* s = nullptr;            // n_atoms x 3 fractional coordinates in [-1/2, 1/2]
    std::size_t n_atoms = 0;
    const std::int64_t* offsets = nullptr;  // n_species + 1: species a is s[offsets[a]:offsets[a+1]]
    int n_species = 0;
    const kspace::Plan* plan = nullptr;
    double* acc = nullptr;  // n_species x plan.slots.size() complex (re, im), zeroed by the caller
    int n_threads = 1;
};
using KSpaceFn = void (*)(const KSpaceProblem&);
// The variant of the kernel for an instruction set ("baseline", "avx2", ...; cpu::usable_variants)
KSpaceFn kspace_kernel_for(const std::string& isa);

#define FASTRDF_DECLARE_KSPACE(isa) \
    namespace isa {                  \
    void kspace_sums(const KSpaceProblem& p); \
    }
FASTRDF_DECLARE_KSPACE(baseline)
FASTRDF_DECLARE_KSPACE(avx2)
FASTRDF_DECLARE_KSPACE(avx512)
FASTRDF_DECLARE_KSPACE(native)
#undef FASTRDF_DECLARE_KSPACE

}  // namespace cpu
}  // namespace fastrdf
