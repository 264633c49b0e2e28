// Self parts of the time correlations (the van Hove function G_s(r, t), the intermediate
// scattering function F_s(q, t)): the displacements r_i(t0 + lag) - r_i(t0) of every atom
// over the given time origins and lags, in float64 from positions made whole.
//
// Threads take every n-th origin (later origins have fewer lags within the frames, so
// contiguous ranges would leave the first thread most of the work). The histogram's counts
// are integers (summed over the threads at the end); the sinc sums are kept per origin, each
// summed over the atoms in their order, and then added in the origins' order: the same bits
// for any thread count.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/cpu.hpp"
#include "fastrdf/trig.hpp"

namespace py = pybind11;

namespace fastrdf {

namespace {

struct Displacements {
    const double* pos = nullptr;  // (n_frames, n_atoms, 3)
    std::int64_t n_frames = 0, n_atoms = 0;
    const std::int64_t* origins = nullptr;  // sorted
    std::int64_t n_origins = 0;
    const std::int64_t* lags = nullptr;  // sorted
    std::int64_t n_lags = 0;
    const std::int32_t* species = nullptr;  // (n_atoms,) 0 .. n_species - 1
    int n_species = 0;
};

// One copy of a loop per x86 vector width, chosen when the module loads (GCC's function
// multi-versioning on Linux): the same IEEE operations in the same order at every width.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define FASTRDF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FASTRDF_CLONES
#endif

// |r_i(t0 + lag) - r_i(t0)| of atom i (x0, x1 the two frames), the squares added as NumPy
// adds them: (dx dx + dy dy) + dz dz, with no fused multiply-add (FASTRDF_FP_FLAGS); every
// pass computes a length here, so that each gives the same bits
inline double length(const double* x0, const double* x1, std::int64_t i) {
    const double dx = x1[3 * i] - x0[3 * i];
    const double dy = x1[3 * i + 1] - x0[3 * i + 1];
    const double dz = x1[3 * i + 2] - x0[3 * i + 2];
    double s = dx * dx + dy * dy;
    s += dz * dz;
    return std::sqrt(s);
}

// lengths d[i] = |r_i(t0 + lag) - r_i(t0)| of every atom
FASTRDF_CLONES void lengths(const Displacements& p, std::int64_t t0, std::int64_t lag, double* d) {
    const double* x0 = p.pos + 3 * t0 * p.n_atoms;
    const double* x1 = p.pos + 3 * (t0 + lag) * p.n_atoms;
#pragma omp simd
    for (std::int64_t i = 0; i < p.n_atoms; ++i) d[i] = length(x0, x1, i);
}

// The bins of numpy.histogram over equal bins (edges e[0] .. e[last + 1], the last bin
// closed). f = (d - lo) scale is the length in bins; the bin is floor(f) unless f lies
// within `eps` of an integer, where the edges' own rounding may decide. eps bounds the
// rounding of f (a few units in the last place of nbins) and the edges' distance from
// lo + k (hi - lo) / nbins, measured on entry; for edges far from equal, eps is infinite
// and every length takes the exact pass.
struct Binning {
    const double* edge;
    double lo, hi, scale, nbins, eps;
    std::int32_t last, outside;
};

// index[i] = base[i] + the bin of |r_i(t0 + lag) - r_i(t0)|, b.outside for a length
// clearly outside the edges, or -1 where the edges must decide (exact_bin()): the lengths
// and their bins in one vectorised loop, so that what is left per displacement is one
// increment
FASTRDF_CLONES void bin_lengths(const Displacements& p, std::int64_t t0, std::int64_t lag,
                                const std::int32_t* base, const Binning b,
                                std::int32_t* index) {
    const double* x0 = p.pos + 3 * t0 * p.n_atoms;
    const double* x1 = p.pos + 3 * (t0 + lag) * p.n_atoms;
#pragma omp simd
    for (std::int64_t i = 0; i < p.n_atoms; ++i) {
        const double d = length(x0, x1, i);
        const double f = (d - b.lo) * b.scale;
        const double whole = std::floor(f);
        const double frac = f - whole;  // (exact)
        // (no branch and no short-circuit: the loop stays vectorised; NaN is neither)
        const bool sure = (f >= b.eps) & (f <= b.nbins - b.eps) & (frac >= b.eps) &
                          (frac <= 1.0 - b.eps);
        const bool away = (f < -b.eps) | (f > b.nbins + b.eps);
        const std::int32_t g = static_cast<std::int32_t>(sure ? whole : 0.0);
        index[i] = sure ? base[i] + g : (away ? b.outside : -1);
    }
}

// The bin of atom i's length by the edges themselves (the lengths bin_lengths left, -1 if
// outside, NaN included): the same length, from length() as in bin_lengths.
inline std::int32_t exact_bin(const Displacements& p, std::int64_t t0, std::int64_t lag,
                              std::int64_t i, const Binning& b) {
    const double* x0 = p.pos + 3 * t0 * p.n_atoms;
    const double* x1 = p.pos + 3 * (t0 + lag) * p.n_atoms;
    const double d = length(x0, x1, i);
    if (!(d >= b.lo && d <= b.hi)) return -1;
    double f = (d - b.lo) * b.scale;
    f = f < 0.0 ? 0.0 : (f > b.last ? b.last : f);
    std::int32_t g = static_cast<std::int32_t>(f);
    while (g > 0 && d < b.edge[g]) --g;
    while (g < b.last && d >= b.edge[g + 1]) ++g;
    return g;
}

// sin y / y (1 at y = 0) of y = q d[i] >= 0 for every atom, in one vectorised loop without
// branches (trig.hpp). y is reduced by the nearest multiple n of pi/2, with pi/2 in three
// parts of 33 bits and a tail (Cody and Waite; each n pi/2 part exact for n < 2^20), and sin
// or cos of the remainder r, |r| <= pi/4, from fdlibm's kernels. y at or above 2^19 (and NaN)
// is left to std::sin, in a second pass.
FASTRDF_CLONES void sinc(const double* d, std::int64_t n, double q, double* v) {
    constexpr double two_over_pi = 6.36619772367581382433e-01;
    constexpr double pio2_1 = 1.57079632673412561417e+00;  // first 33 bits of pi/2
    constexpr double pio2_2 = 6.07710050630396597660e-11;  // next 33 bits
    constexpr double pio2_3 = 2.02226624871116645580e-21;  // next 33 bits
    constexpr double pio2_3t = 8.47842766036889956997e-32;  // pi/2 - the three parts
    constexpr double limit = 524288.0;  // 2^19
    int beyond = 0;
#pragma omp simd reduction(| : beyond)
    for (std::int64_t i = 0; i < n; ++i) {
        const double y = q * d[i];
        const bool reduced = y < limit;  // (the rest: the second pass; NaN too)
        beyond |= !reduced;
        const double yy = reduced ? y : 0.0;
        const double k = std::nearbyint(yy * two_over_pi);
        const double r = (((yy - k * pio2_1) - k * pio2_2) - k * pio2_3) - k * pio2_3t;
        const double sin_r = trig::sin_kernel(r), cos_r = trig::cos_kernel(r);
        const std::int32_t quadrant = static_cast<std::int32_t>(k);
        double sv = (quadrant & 1) ? cos_r : sin_r;
        sv = (quadrant & 2) ? -sv : sv;
        v[i] = y == 0.0 ? 1.0 : sv / y;
    }
    if (beyond)
        for (std::int64_t i = 0; i < n; ++i) {
            const double y = q * d[i];
            if (!(y < limit)) v[i] = std::sin(y) / y;
        }
}

using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

// (the arrays are the caller's: pybind11 converted them for the call, and they outlive it)
Displacements parse(const F64& pos, const I64& origins, const I64& lags, const I32& species,
                    int n_species) {
    if (pos.ndim() != 3 || pos.shape(2) != 3)
        throw std::invalid_argument("positions: must be (n_frames, n_atoms, 3) float64");
    if (origins.ndim() != 1) throw std::invalid_argument("origins: must be 1-D");
    if (lags.ndim() != 1) throw std::invalid_argument("lags: must be 1-D");
    if (species.ndim() != 1 || species.shape(0) != pos.shape(1))
        throw std::invalid_argument("species: one species index per atom");
    if (n_species < 1) throw std::invalid_argument("n_species: must be >= 1");
    Displacements p;
    p.pos = pos.data();
    p.n_frames = pos.shape(0);
    p.n_atoms = pos.shape(1);
    p.origins = origins.data();
    p.n_origins = origins.shape(0);
    p.lags = lags.data();
    p.n_lags = lags.shape(0);
    p.species = species.data();
    p.n_species = n_species;
    for (std::int64_t k = 0; k < p.n_origins; ++k)
        if (p.origins[k] < 0 || p.origins[k] >= p.n_frames ||
            (k > 0 && p.origins[k] <= p.origins[k - 1]))
            throw std::invalid_argument("origins: increasing frames of positions");
    for (std::int64_t j = 0; j < p.n_lags; ++j)
        if (p.lags[j] < 0 || (j > 0 && p.lags[j] <= p.lags[j - 1]))
            throw std::invalid_argument("lags: increasing, each >= 0");
    for (std::int64_t i = 0; i < p.n_atoms; ++i)
        if (p.species[i] < 0 || p.species[i] >= n_species)
            throw std::invalid_argument("species: an index outside 0 .. n_species - 1");
    return p;
}

int threads_for(int n_threads, std::int64_t work) {
    if (n_threads < 0) throw std::invalid_argument("n_threads: must be >= 1 (or 0 for all cores)");
    const int t = n_threads == 0 ? cpu::hardware_threads() : n_threads;
    return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(t, work)));
}

// Adds to out (n_species, n_lags, nbins) the counts of the displacement lengths of every
// origin t0 and lag with t0 + lag a frame of positions, binned as numpy.histogram bins equal
// bins: the index from the scaled length, moved by one where rounding put a length on the
// wrong side of its edge; the last bin closed. An origin's lags run one after the other.
void displacement_histogram(const F64& positions, const I64& origins, const I64& lags,
                            const I32& species, int n_species, const F64& edges,
                            py::array out_in, int n_threads) {
    const Displacements p = parse(positions, origins, lags, species, n_species);
    if (edges.ndim() != 1 || edges.shape(0) < 2)
        throw std::invalid_argument("edges: a 1-D float64 array of at least two edges");
    const std::int64_t nbins = edges.shape(0) - 1;
    const double* e = edges.data();
    for (std::int64_t k = 0; k < nbins; ++k)
        if (!(e[k] < e[k + 1])) throw std::invalid_argument("edges: must increase");
    auto out = py::array_t<std::int64_t, py::array::c_style>::ensure(out_in);
    if (!out || out.ndim() != 3 || out.shape(0) != n_species || out.shape(1) != p.n_lags ||
        out.shape(2) != nbins || !out.writeable() || out.ptr() != out_in.ptr())
        throw std::invalid_argument(
            "out: a writeable C-contiguous int64 (n_species, n_lags, nbins) array");
    std::int64_t* o = out.mutable_data();
    const double lo = e[0], hi = e[nbins], scale = static_cast<double>(nbins) / (hi - lo);
    // eps (in bins): f's rounding (a few units in the last place of nbins, and of the
    // edges' magnitude in bins) plus each edge's distance from k step + lo, doubled; edges
    // far from equal (eps above 1e-3 of a bin) take the exact pass for every length
    const double step = (hi - lo) / static_cast<double>(nbins);
    const double u = std::numeric_limits<double>::epsilon() / 2;
    double apart = 0.0;
    for (std::int64_t k = 0; k <= nbins; ++k)
        apart = std::max(apart, std::abs(e[k] - (static_cast<double>(k) * step + lo)) / step);
    double eps = 2.0 * apart +
                 16.0 * u * (static_cast<double>(nbins) + std::max(std::abs(lo), std::abs(hi)) / step + 1.0);
    if (!(eps <= 1e-3)) eps = std::numeric_limits<double>::infinity();
    const std::size_t row = static_cast<std::size_t>(p.n_species * nbins);
    const std::size_t total = row * static_cast<std::size_t>(p.n_lags);
    if (4 * row + 1 > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        throw std::invalid_argument("edges: too many bins for the species (4 n_species nbins "
                                    "must stay below 2**31)");
    const int nt = threads_for(n_threads, p.n_origins);
    std::vector<std::vector<std::int64_t>> hist(static_cast<std::size_t>(nt));
    {
        py::gil_scoped_release release;
        cpu::parallel_run(nt, [&](int tid) {
            auto& h = hist[static_cast<std::size_t>(tid)];
            h.assign(total, 0);
            // four interleaved copies of one lag's histogram: displacements crowd into a few
            // bins, and consecutive increments of one counter would wait for each other; the
            // slot after them takes the lengths outside the edges
            std::vector<std::int64_t> scratch(4 * row + 1, 0);
            std::vector<std::int32_t> index(static_cast<std::size_t>(p.n_atoms));
            // each atom's copy and species row: (i mod 4) row + species nbins
            std::vector<std::int32_t> base(static_cast<std::size_t>(p.n_atoms));
            for (std::int64_t i = 0; i < p.n_atoms; ++i)
                base[static_cast<std::size_t>(i)] =
                    static_cast<std::int32_t>((i & 3) * static_cast<std::int64_t>(row) + p.species[i] * nbins);
            const Binning bins{e, lo, hi, scale, static_cast<double>(nbins), eps,
                               static_cast<std::int32_t>(nbins - 1),
                               static_cast<std::int32_t>(4 * row)};
            const std::int64_t n_atoms = p.n_atoms;
            const std::int32_t* const ix = index.data();
            std::int64_t* const sc = scratch.data();
            // every nt-th origin: later origins have fewer lags within the frames
            for (std::int64_t k = tid; k < p.n_origins; k += nt) {
                const std::int64_t t0 = p.origins[k];
                for (std::int64_t j = 0; j < p.n_lags && t0 + p.lags[j] < p.n_frames; ++j) {
                    bin_lengths(p, t0, p.lags[j], base.data(), bins, index.data());
                    for (std::int64_t i = 0; i < n_atoms; ++i) {
                        const std::int32_t x = ix[i];
                        if (x >= 0) {
                            ++sc[x];
                        } else {  // (within eps of an edge: rare)
                            const std::int32_t g = exact_bin(p, t0, p.lags[j], i, bins);
                            ++sc[g >= 0 ? base[static_cast<std::size_t>(i)] + g : bins.outside];
                        }
                    }
                    // into lag j's rows of this thread's histogram (n_species, n_lags, nbins)
                    for (int a = 0; a < p.n_species; ++a) {
                        std::int64_t* dst = h.data() + (static_cast<std::size_t>(a) * p.n_lags + j) * nbins;
                        for (std::int64_t b = 0; b < nbins; ++b) {
                            const std::size_t c = static_cast<std::size_t>(a * nbins + b);
                            dst[b] += scratch[c] + scratch[row + c] + scratch[2 * row + c] +
                                      scratch[3 * row + c];
                        }
                    }
                    std::fill(scratch.begin(), scratch.end(), 0);
                }
            }
        });
    }
    for (const auto& h : hist)
        for (std::size_t j = 0; j < total; ++j) o[j] += h[j];
}

// (n_species, n_lags, n_q) sums over the origins (with t0 + lag a frame) and atoms of
// sin(q d) / (q d) (1 at d = 0); each origin's sums kept apart and added in the origins'
// order at the end.
py::array_t<double> sinc_sums(const F64& positions, const I64& origins, const I64& lags,
                              const I32& species, int n_species, const F64& q_in,
                              int n_threads) {
    const Displacements p = parse(positions, origins, lags, species, n_species);
    if (q_in.ndim() != 1) throw std::invalid_argument("q: a 1-D float64 array");
    const std::int64_t nq = q_in.shape(0);
    const double* q = q_in.data();
    const std::size_t lag_row = static_cast<std::size_t>(n_species * nq);
    const std::size_t row = lag_row * static_cast<std::size_t>(p.n_lags);  // one origin
    std::vector<double> per_origin(static_cast<std::size_t>(p.n_origins) * row, 0.0);
    // the runs of consecutive atoms of one species (one a species where they are grouped)
    struct Run {
        std::int64_t begin, end;
        int species;
    };
    std::vector<Run> runs;
    for (std::int64_t i = 0; i < p.n_atoms; ++i)
        if (runs.empty() || runs.back().species != p.species[i])
            runs.push_back({i, i + 1, p.species[i]});
        else
            runs.back().end = i + 1;
    const int nt = threads_for(n_threads, p.n_origins);
    {
        py::gil_scoped_release release;
        cpu::parallel_run(nt, [&](int tid) {
            std::vector<double> d(static_cast<std::size_t>(p.n_atoms)),
                v(static_cast<std::size_t>(p.n_atoms));
            // every nt-th origin: later origins have fewer lags within the frames
            for (std::int64_t k = tid; k < p.n_origins; k += nt) {
                const std::int64_t t0 = p.origins[k];
                for (std::int64_t j = 0; j < p.n_lags && t0 + p.lags[j] < p.n_frames; ++j) {
                    lengths(p, t0, p.lags[j], d.data());
                    double* s = per_origin.data() + static_cast<std::size_t>(k) * row +
                                static_cast<std::size_t>(j) * lag_row;
                    for (std::int64_t m = 0; m < nq; ++m) {
                        sinc(d.data(), p.n_atoms, q[m], v.data());
                        // each run of atoms of one species summed in four interleaved
                        // partial sums, added at the run's end (a single running sum would
                        // wait on every addition): a fixed order, the same bits for any
                        // thread count and vector width
                        for (const Run& u : runs) {
                            const double* x = v.data();
                            double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
                            std::int64_t i = u.begin;
                            for (; i + 4 <= u.end; i += 4) {
                                a0 += x[i];
                                a1 += x[i + 1];
                                a2 += x[i + 2];
                                a3 += x[i + 3];
                            }
                            for (; i < u.end; ++i) a0 += x[i];
                            s[static_cast<std::size_t>(u.species * nq + m)] += (a0 + a1) + (a2 + a3);
                        }
                    }
                }
            }
        });
    }
    // (n_lags, n_species, n_q) summed over the origins in order, then as (species, lags, q)
    std::vector<double> acc(row, 0.0);
    for (std::int64_t k = 0; k < p.n_origins; ++k)
        for (std::size_t j = 0; j < row; ++j) acc[j] += per_origin[static_cast<std::size_t>(k) * row + j];
    py::array_t<double> out({static_cast<py::ssize_t>(n_species), static_cast<py::ssize_t>(p.n_lags),
                             static_cast<py::ssize_t>(nq)});
    double* o = out.mutable_data();
    for (std::int64_t j = 0; j < p.n_lags; ++j)
        for (int a = 0; a < n_species; ++a)
            for (std::int64_t m = 0; m < nq; ++m)
                o[(static_cast<std::size_t>(a) * p.n_lags + j) * nq + m] =
                    acc[static_cast<std::size_t>(j) * lag_row + static_cast<std::size_t>(a * nq + m)];
    return out;
}

// Positions made whole from consecutive frames (out (F, N, 3) float64): each step from the
// last frame taken to its minimum image in fractional coordinates of the frame's box H (rows
// a, b, c; inv its inverse) and accumulated from the first frame. Threads take ranges of
// atoms. Returns each frame's longest step (0 for the first), which the caller checks.
template <class T>
void unwrap_steps(const T* pos, std::int64_t n_frames, std::int64_t n_atoms, const double* h,
                  const double* inv, double* out, double* longest, int nt) {
    for (std::int64_t i = 0; i < 3 * n_atoms; ++i) out[i] = static_cast<double>(pos[i]);
    std::vector<std::vector<double>> top(static_cast<std::size_t>(nt),
                                         std::vector<double>(static_cast<std::size_t>(n_frames), 0.0));
    cpu::parallel_run(nt, [&](int tid) {
        const std::int64_t a0 = n_atoms * tid / nt, a1 = n_atoms * (tid + 1) / nt;
        double* mine = top[static_cast<std::size_t>(tid)].data();
        for (std::int64_t t = 1; t < n_frames; ++t) {
            const double* H = h + 9 * t;
            const double* G = inv + 9 * t;
            const T* now = pos + 3 * t * n_atoms;
            const T* before = pos + 3 * (t - 1) * n_atoms;
            const double* last = out + 3 * (t - 1) * n_atoms;
            double* cur = out + 3 * t * n_atoms;
            double m = 0.0;
            for (std::int64_t i = a0; i < a1; ++i) {
                double d[3], f[3];
                for (int c = 0; c < 3; ++c)
                    d[c] = static_cast<double>(now[3 * i + c]) - static_cast<double>(before[3 * i + c]);
                for (int c = 0; c < 3; ++c) {
                    f[c] = d[0] * G[c] + d[1] * G[3 + c] + d[2] * G[6 + c];
                    f[c] -= std::nearbyint(f[c]);  // (the default rounding: half to even, as NumPy)
                }
                double s2 = 0.0;
                for (int c = 0; c < 3; ++c) {
                    const double step = f[0] * H[c] + f[1] * H[3 + c] + f[2] * H[6 + c];
                    cur[3 * i + c] = last[3 * i + c] + step;
                    s2 += step * step;
                }
                m = s2 > m ? s2 : m;
            }
            mine[t] = m;
        }
    });
    for (std::int64_t t = 0; t < n_frames; ++t) {
        double m = 0.0;
        for (const auto& v : top) m = std::max(m, v[static_cast<std::size_t>(t)]);
        longest[t] = std::sqrt(m);
    }
}

// (F, N, 3) float64 positions made whole, and (F,) the longest step into each frame
py::tuple unwrap(const py::array& positions, const F64& boxes, const F64& inverses,
                 int n_threads) {
    if (positions.ndim() != 3 || positions.shape(2) != 3)
        throw std::invalid_argument("positions: must be (n_frames, n_atoms, 3)");
    const std::int64_t nf = positions.shape(0), na = positions.shape(1);
    for (const F64* m : {&boxes, &inverses})
        if (m->ndim() != 3 || m->shape(0) != nf || m->shape(1) != 3 || m->shape(2) != 3)
            throw std::invalid_argument("boxes, inverses: (n_frames, 3, 3) float64");
    py::array_t<double> out({static_cast<py::ssize_t>(nf), static_cast<py::ssize_t>(na),
                             static_cast<py::ssize_t>(3)});
    py::array_t<double> longest(static_cast<py::ssize_t>(nf));
    if (nf == 0) return py::make_tuple(out, longest);
    const int nt = threads_for(n_threads, std::max<std::int64_t>(1, na / 1024));
    auto run = [&](auto typed) {
        py::gil_scoped_release release;
        unwrap_steps(typed.data(), nf, na, boxes.data(), inverses.data(), out.mutable_data(),
                     longest.mutable_data(), nt);
    };
    if (py::isinstance<py::array_t<float>>(positions) &&
        (positions.flags() & py::array::c_style))
        run(py::array_t<float, py::array::c_style>::ensure(positions));
    else
        run(F64::ensure(positions));
    return py::make_tuple(out, longest);
}

}  // namespace

void bind_displacements(py::module_& m) {
    m.def("displacement_histogram", &displacement_histogram, py::arg("positions"),
          py::arg("origins"), py::arg("lags"), py::arg("species"), py::arg("n_species"),
          py::arg("edges"), py::arg("out"), py::arg("n_threads") = 0,
          "Add to out (n_species, n_lags, nbins) the counts of |r_i(t0 + lag) - r_i(t0)| over "
          "the origins t0 (t0 + lag a frame), binned as numpy.histogram bins equal bins");
    m.def("unwrap", &unwrap, py::arg("positions"), py::arg("boxes"), py::arg("inverses"),
          py::arg("n_threads") = 0,
          "((F, N, 3) float64 positions made whole from consecutive frames, (F,) the longest "
          "minimum-image step into each frame); boxes and inverses (F, 3, 3), rows a, b, c");
    m.def("sinc_sums", &sinc_sums, py::arg("positions"), py::arg("origins"), py::arg("lags"),
          py::arg("species"), py::arg("n_species"), py::arg("q"), py::arg("n_threads") = 0,
          "(n_species, n_lags, n_q): sums over the origins (t0 + lag a frame) and atoms of "
          "sin(q d) / (q d), d = |r_i(t0 + lag) - r_i(t0)|");
}

}  // namespace fastrdf
