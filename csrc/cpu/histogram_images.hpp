// The image the pairs of a block of 16 j atoms take with the rows of a cell (cell lists,
// periodic boxes): the bounds of atoms and the certificate that one image holds for a block.
// A part of histogram.cpp (histogram_part.hpp).
#pragma once
#include "histogram_part.hpp"

// The image every pair of a block of 16 j atoms takes with every row of a cell (cell lists,
// periodic boxes): kOwn, each pair its own (dist2); kShift, the shift s for all (reduce(d, s),
// the same r2 bit for bit: common_image, geometry.hpp); kZero, the shift 0 for all (norm(d)).
enum BlockKind : int { kOwn = 0, kShift = 1, kZero = 2 };
template <typename T>
struct BlockImage {
    T s[3];
    int kind;
};

// Atoms of a cell's run (rows) or of a block: bounds of the coordinates and, triclinic boxes,
// of the projections f[k] . x (TriclinicBox::projection, precomputed per atom in proj).
struct AtomBounds {
    float lo[3], hi[3];
    double plo[3], phi[3];
    void take(const float* x, const float* y, const float* z, const double* proj, int64_t a0, int64_t a1) {
        lo[0] = hi[0] = x[a0];
        lo[1] = hi[1] = y[a0];
        lo[2] = hi[2] = z[a0];
        for (int64_t k = a0 + 1; k < a1; ++k) {
            lo[0] = std::min(lo[0], x[k]);
            lo[1] = std::min(lo[1], y[k]);
            lo[2] = std::min(lo[2], z[k]);
            hi[0] = std::max(hi[0], x[k]);
            hi[1] = std::max(hi[1], y[k]);
            hi[2] = std::max(hi[2], z[k]);
        }
        if (!proj) return;
        for (int c = 0; c < 3; ++c) plo[c] = phi[c] = proj[3 * a0 + c];
        for (int64_t k = a0 + 1; k < a1; ++k)
            for (int c = 0; c < 3; ++c) {
                plo[c] = std::min(plo[c], proj[3 * k + c]);
                phi[c] = std::max(phi[c], proj[3 * k + c]);
            }
    }
};

// Certifies the blocks of 16 j atoms [j0 + 16 m, j0 + 16 m + 16) of [j0, j1) against rows
// whose coordinates lie within rows.lo, rows.hi: every displacement fl(xj - xi) lies within
// [fl(lo_j - hi_i), fl(hi_j - lo_i)] per component (rounding is monotone), so when the two
// corners get one image (common_image), every pair of the block does. Triclinic boxes try the
// tighter projections first (TriclinicBox::common_image_projected; perr: the error of the
// projections' bounds, from the largest |coordinate| per axis, xmax).
template <typename T, class Box>
void certify_blocks(const Box& box, const float* x, const float* y, const float* z,
                    const double* proj, const double (&xmax)[3], int64_t j0, int64_t j1,
                    const AtomBounds& rows, BlockImage<T>* out, uint64_t (&kinds)[3]) {
    for (int64_t b0 = j0; b0 < j1; b0 += kDummySlots) {
        AtomBounds blk;
        blk.take(x, y, z, proj, b0, std::min<int64_t>(b0 + kDummySlots, j1));
        BlockImage<T>& o = out[(b0 - j0) / kDummySlots];
        bool one = false;
        if constexpr (is_triclinic<Box>) {
            double plo[3], phi[3], perr[3], dmax[3];
            for (int c = 0; c < 3; ++c) {
                plo[c] = blk.plo[c] - rows.phi[c];
                phi[c] = blk.phi[c] - rows.plo[c];
                dmax[c] = std::max(double(blk.hi[c]) - double(rows.lo[c]),
                                   double(rows.hi[c]) - double(blk.lo[c]));
            }
            for (int k = 0; k < 3; ++k)
                perr[k] = 0x1p-47 * (std::fabs(double(box.f[k][0])) * xmax[0] +
                                     std::fabs(double(box.f[k][1])) * xmax[1] +
                                     std::fabs(double(box.f[k][2])) * xmax[2]);
            one = box.common_image_projected(plo, phi, perr, dmax, o.s);
        }
        if (!one) {
            const T dl[3] = {static_cast<T>(blk.lo[0] - rows.hi[0]), static_cast<T>(blk.lo[1] - rows.hi[1]),
                             static_cast<T>(blk.lo[2] - rows.hi[2])};
            const T dh[3] = {static_cast<T>(blk.hi[0] - rows.lo[0]), static_cast<T>(blk.hi[1] - rows.lo[1]),
                             static_cast<T>(blk.hi[2] - rows.lo[2])};
            one = box.common_image(dl, dh, o.s);
        }
        if (!one)
            o.kind = kOwn;
        else if (has_norm<Box>::value && o.s[0] == T(0) && o.s[1] == T(0) && o.s[2] == T(0))
            o.kind = kZero;
        else
            o.kind = kShift;
        ++kinds[o.kind];
    }
}
