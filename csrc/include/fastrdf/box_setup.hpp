// Host-side preparation of a periodic box for the kernels (CPU and CUDA alike).
//
// A triclinic box is turned into a reduced basis of the same lattice (integer combinations of
// the box vectors, so the lattice - and hence every minimum image - is unchanged, and in double
// precision the basis stays exact), its reciprocal vectors and widths, and the list of extra
// lattice vectors that must be tried so that every distance up to r_max is the true minimum
// image. With r_max below half the smallest width that list is empty.
#pragma once

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace fastrdf {

using Vec3 = std::array<double, 3>;

inline double dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
inline Vec3 cross(const Vec3& a, const Vec3& b) {
    return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

struct TriclinicSetup {
    Vec3 a[3];                   // reduced basis (rows)
    Vec3 f[3];                   // reciprocal vectors: f[k] . a[l] = delta_kl
    double width[3];             // distance between opposite faces of the reduced cell
    std::vector<double> images;  // 3 * n lattice vectors besides 0 that can be within r_max
};

// box: three box vectors as rows (MDAnalysis triclinic_vectors layout).
inline TriclinicSetup setup_triclinic(const double box[9], double rmax) {
    TriclinicSetup s;
    for (int k = 0; k < 3; ++k) s.a[k] = {box[3 * k], box[3 * k + 1], box[3 * k + 2]};
    const double vol0 = std::fabs(dot(s.a[0], cross(s.a[1], s.a[2])));
    if (!(vol0 > 0.0) || !std::isfinite(vol0))
        throw std::invalid_argument("box: the box vectors are degenerate (zero or non-finite volume)");

    // Greedy pairwise reduction (Lagrange-Gauss generalised to 3D): shorten each vector by
    // integer multiples of the others until nothing changes. Integer steps keep the lattice.
    for (int sweep = 0; sweep < 64; ++sweep) {
        bool changed = false;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) {
                if (i == j) continue;
                const double m = std::nearbyint(dot(s.a[j], s.a[i]) / dot(s.a[i], s.a[i]));
                if (m != 0.0) {
                    Vec3 t = {s.a[j][0] - m * s.a[i][0], s.a[j][1] - m * s.a[i][1], s.a[j][2] - m * s.a[i][2]};
                    if (dot(t, t) < dot(s.a[j], s.a[j])) {
                        s.a[j] = t;
                        changed = true;
                    }
                }
            }
        }
        if (!changed) break;
    }

    const double det = dot(s.a[0], cross(s.a[1], s.a[2]));
    for (int k = 0; k < 3; ++k) {
        const Vec3 c = cross(s.a[(k + 1) % 3], s.a[(k + 2) % 3]);
        s.f[k] = {c[0] / det, c[1] / det, c[2] / det};
        s.width[k] = 1.0 / std::sqrt(dot(s.f[k], s.f[k]));
    }

    // Every image n != 0 is at least (|n_k| - 1/2 - eps) w_k away from a vector of the centred
    // cell (eps covers rounding of the fractional coordinates). Keep those that can be <= rmax
    // (see docs/design.rst, section "Extra images of a triclinic box").
    const double eps = 1e-3;
    int nmax[3];
    for (int k = 0; k < 3; ++k) {
        const double bound = std::floor(rmax / s.width[k] + 0.5 + eps);
        if (bound > 50.0)
            throw std::invalid_argument(
                "range: r_max is more than 50 box widths; periodic images that far are not supported");
        nmax[k] = static_cast<int>(bound);
    }
    for (int n0 = -nmax[0]; n0 <= nmax[0]; ++n0)
        for (int n1 = -nmax[1]; n1 <= nmax[1]; ++n1)
            for (int n2 = -nmax[2]; n2 <= nmax[2]; ++n2) {
                if (n0 == 0 && n1 == 0 && n2 == 0) continue;
                for (int c = 0; c < 3; ++c)
                    s.images.push_back(n0 * s.a[0][c] + n1 * s.a[1][c] + n2 * s.a[2][c]);
            }
    return s;
}

}  // namespace fastrdf
