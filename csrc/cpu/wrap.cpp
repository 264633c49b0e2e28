// Wrapping positions into the primary cell, in float32, with MDAnalysis's arithmetic.
//
// MDAnalysis's capped_distance wraps positions into the primary cell (in float32) before it
// takes differences whenever it uses its grid search, and for triclinic boxes always. A wrapped
// float32 coordinate differs from the unwrapped one by a rounding error of ~1e-6 A, enough to
// move a pair across a bin edge now and then; doing the same wrap gives the same distances.
// The order of operations below is part of the result: lower bound first, then upper bound
// (a coordinate just below 0 can land exactly on the upper bound), single shifts before
// multi-box shifts, float32 for coordinates, double for bounds.
#include <cmath>
#include <cstddef>

#include "fastrdf/cpu.hpp"

namespace fastrdf {
namespace cpu {

void wrap_ortho(float* xyz, std::size_t n, const float box[3]) {
    if (!box[0] && !box[1] && !box[2]) return;
    const double inv[3] = {1.0 / static_cast<double>(box[0]), 1.0 / static_cast<double>(box[1]),
                           1.0 / static_cast<double>(box[2])};
    for (std::size_t i = 0; i < n; ++i) {
        for (int c = 0; c < 3; ++c) {
            float& x = xyz[3 * i + c];
            float v = x;
            if (v < 0.0f) {
                v += box[c];
                if (v < 0.0f) {
                    const int s = static_cast<int>(std::floor(x * inv[c]));
                    x -= s * box[c];
                    if (x < 0.0f) x += box[c];
                } else {
                    x = v;
                }
            }
            if (v >= box[c]) {
                v -= box[c];
                if (v >= box[c]) {
                    const int s = static_cast<int>(std::floor(x * inv[c]));
                    x -= s * box[c];
                    if (x >= box[c]) x -= box[c];
                } else {
                    x = v;
                }
            }
        }
    }
}

namespace {
// One pass of single-box shifts along c, b, a; returns true if a multi-box shift is needed.
struct TriclinicWrap {
    const float* m;
    double bi3, bi6, zfac;

    bool single(float crd[3], bool check) const {
        bool multi = false;
        if (crd[2] < 0.0f) {
            crd[0] += m[6]; crd[1] += m[7]; crd[2] += m[8];
            if (check && crd[2] < 0.0f) multi = true;
        }
        if (crd[2] >= m[8]) {
            crd[0] -= m[6]; crd[1] -= m[7]; crd[2] -= m[8];
            if (check && crd[2] >= m[8]) multi = true;
        }
        if (multi) return true;
        double lo = crd[2] * zfac;
        double hi = lo + m[4];
        if (crd[1] < lo) {
            crd[0] += m[3]; crd[1] += m[4];
            if (check && crd[1] < lo) multi = true;
        }
        if (crd[1] >= hi) {
            crd[0] -= m[3]; crd[1] -= m[4];
            if (check && crd[1] >= hi) multi = true;
        }
        if (multi) return true;
        lo = -(crd[1] * bi3 + crd[2] * bi6) * m[0];
        hi = lo + m[0];
        if (crd[0] < lo) {
            crd[0] += m[0];
            if (check && crd[0] < lo) multi = true;
        }
        if (crd[0] >= hi) {
            crd[0] -= m[0];
            if (check && crd[0] >= hi) multi = true;
        }
        return multi;
    }
};
}  // namespace

void wrap_triclinic(float* xyz, std::size_t n, const float m[9]) {
    if (!m[0] && !m[4] && !m[8]) return;
    const double bi0 = 1.0 / static_cast<double>(m[0]);
    const double bi4 = 1.0 / static_cast<double>(m[4]);
    const double bi8 = 1.0 / static_cast<double>(m[8]);
    const double bi3 = -m[3] * bi0 * bi4;
    const double bi6 = (-bi3 * m[7] - m[6] * bi0) * bi8;
    const double bi7 = -m[7] * bi4 * bi8;
    const TriclinicWrap w{m, bi3, bi6, static_cast<double>(m[7]) * bi8};
    for (std::size_t i = 0; i < n; ++i) {
        float* p = xyz + 3 * i;
        float crd[3] = {p[0], p[1], p[2]};
        if (!w.single(crd, true)) {
            p[0] = crd[0]; p[1] = crd[1]; p[2] = crd[2];
            continue;
        }
        int s = static_cast<int>(std::floor(p[2] * bi8));
        p[2] -= s * m[8]; p[1] -= s * m[7]; p[0] -= s * m[6];
        s = static_cast<int>(std::floor(p[1] * bi4 + p[2] * bi7));
        p[1] -= s * m[4]; p[0] -= s * m[3];
        s = static_cast<int>(std::floor(p[0] * bi0 + p[1] * bi3 + p[2] * bi6));
        p[0] -= s * m[0];
        float c2[3] = {p[0], p[1], p[2]};
        w.single(c2, false);
        p[0] = c2[0]; p[1] = c2[1]; p[2] = c2[2];
    }
}

}  // namespace cpu
}  // namespace fastrdf
