// Replays TriclinicBox::common_image_projected (geometry.hpp) against index() and reduce()
// for random sets of 6 x 6 pairs in random cells, placed about half a lattice vector apart
// (the nearest image's tie) with spreads from 1e-8 to 1 cell: a set the test certifies must
// give every pair the certified shift and the same r2, bit for bit. Run with the margins
// (must find no such set) and without them (must find some: the replay can fail).
// Built and run by tests/kernels/test_cells.py::test_projected_certification_replay.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <cmath>
#include <algorithm>
#include "fastrdf/geometry.hpp"
using namespace fastrdf;
template <typename T>
long run(double scale_e, long trials, unsigned seed, long& certified) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> U(0.0, 1.0);
    long bad = 0;
    certified = 0;
    for (long t = 0; t < trials; ++t) {
        // a random cell: basis rows a, reciprocal f
        double L = 10 + 90 * U(rng);
        double A[3][3] = {{L, 0, 0}, {L * (U(rng) - 0.5), L * (0.7 + 0.3 * U(rng)), 0},
                          {L * (U(rng) - 0.5), L * (U(rng) - 0.5), L * (0.6 + 0.4 * U(rng))}};
        // reciprocal rows: inverse transpose
        double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) - A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) + A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
        double inv[3][3];
        inv[0][0] = (A[1][1] * A[2][2] - A[1][2] * A[2][1]) / det; inv[0][1] = (A[0][2] * A[2][1] - A[0][1] * A[2][2]) / det; inv[0][2] = (A[0][1] * A[1][2] - A[0][2] * A[1][1]) / det;
        inv[1][0] = (A[1][2] * A[2][0] - A[1][0] * A[2][2]) / det; inv[1][1] = (A[0][0] * A[2][2] - A[0][2] * A[2][0]) / det; inv[1][2] = (A[0][2] * A[1][0] - A[0][0] * A[1][2]) / det;
        inv[2][0] = (A[1][0] * A[2][1] - A[1][1] * A[2][0]) / det; inv[2][1] = (A[0][1] * A[2][0] - A[0][0] * A[2][1]) / det; inv[2][2] = (A[0][0] * A[1][1] - A[0][1] * A[1][0]) / det;
        TriclinicBox<T, false> box;
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) { box.a[r][c] = T(A[r][c]); box.f[r][c] = T(inv[c][r]); }
        // rows near p, block near p + (half a lattice vector k, times 1 + tiny), in float
        double p[3], q[3];
        int k = rng() % 3;
        double off = 1e3 * (U(rng) - 0.5);
        for (int c = 0; c < 3; ++c) { p[c] = off * U(rng); q[c] = p[c] + A[k][c] * (0.5 + 1e-6 * (U(rng) - 0.5)); }
        const int n = 6;
        float xi[n][3], xj[n][3];
        double spread = std::pow(10.0, -8 + 8 * U(rng)) * L;
        for (int m = 0; m < n; ++m)
            for (int c = 0; c < 3; ++c) {
                xi[m][c] = float(p[c] + spread * (U(rng) - 0.5));
                xj[m][c] = float(q[c] + spread * (U(rng) - 0.5));
            }
        double plo[3], phi[3], dmax[3] = {0, 0, 0}, xmax[3] = {0, 0, 0}, perr[3];
        double Pilo[3] = {1e300, 1e300, 1e300}, Pihi[3] = {-1e300, -1e300, -1e300}, Pjlo[3] = {1e300, 1e300, 1e300}, Pjhi[3] = {-1e300, -1e300, -1e300};
        for (int m = 0; m < n; ++m)
            for (int kk = 0; kk < 3; ++kk) {
                double a = box.projection(kk, xi[m][0], xi[m][1], xi[m][2]), b = box.projection(kk, xj[m][0], xj[m][1], xj[m][2]);
                Pilo[kk] = std::min(Pilo[kk], a); Pihi[kk] = std::max(Pihi[kk], a);
                Pjlo[kk] = std::min(Pjlo[kk], b); Pjhi[kk] = std::max(Pjhi[kk], b);
            }
        for (int m = 0; m < n; ++m)
            for (int m2 = 0; m2 < n; ++m2)
                for (int c = 0; c < 3; ++c) {
                    dmax[c] = std::max(dmax[c], std::fabs(double(xj[m2][c]) - double(xi[m][c])));
                    xmax[c] = std::max({xmax[c], std::fabs(double(xj[m2][c])), std::fabs(double(xi[m][c]))});
                }
        for (int kk = 0; kk < 3; ++kk) {
            plo[kk] = Pjlo[kk] - Pihi[kk]; phi[kk] = Pjhi[kk] - Pilo[kk];
            perr[kk] = scale_e * 0x1p-47 * (std::fabs(double(box.f[kk][0])) * xmax[0] + std::fabs(double(box.f[kk][1])) * xmax[1] + std::fabs(double(box.f[kk][2])) * xmax[2]);
        }
        // scale_e = 0: no margin at all (the mutation)
        double dm[3] = {dmax[0] * scale_e, dmax[1] * scale_e, dmax[2] * scale_e};
        T s[3];
        if (!box.common_image_projected(plo, phi, perr, dm, s)) continue;
        ++certified;
        for (int m = 0; m < n; ++m)
            for (int m2 = 0; m2 < n; ++m2) {
                const T dx = T(xj[m2][0] - xi[m][0]), dy = T(xj[m2][1] - xi[m][1]), dz = T(xj[m2][2] - xi[m][2]);
                T nn[3], ss[3];
                box.index(dx, dy, dz, nn);
                box.shift(nn, ss);
                if (box.reduce(dx, dy, dz, ss) != box.reduce(dx, dy, dz, s) || ss[0] != s[0] || ss[1] != s[1] || ss[2] != s[2]) { ++bad; m = n; break; }
            }
    }
    return bad;
}
int main(int argc, char** argv) {
    const long trials = argc > 1 ? std::atol(argv[1]) : 1000000;
    long c;
    long b = run<float>(1.0, trials, 1, c);
    std::printf("float margin %ld %ld\n", b, c);
    b = run<float>(0.0, trials, 1, c);
    std::printf("float nomargin %ld %ld\n", b, c);
    b = run<double>(1.0, trials, 2, c);
    std::printf("double margin %ld %ld\n", b, c);
    b = run<double>(0.0, trials, 2, c);
    std::printf("double nomargin %ld %ld\n", b, c);
}
