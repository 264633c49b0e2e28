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
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/cpu.hpp"

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

// lengths d[i] = |r_i(t0 + lag) - r_i(t0)|, the squares added as NumPy adds them:
// (dx dx + dy dy) + dz dz, with no fused multiply-add (FASTRDF_FP_FLAGS)
FASTRDF_CLONES void lengths(const Displacements& p, std::int64_t t0, std::int64_t lag, double* d) {
    const double* a = p.pos + 3 * t0 * p.n_atoms;
    const double* b = p.pos + 3 * (t0 + lag) * p.n_atoms;
#pragma omp simd
    for (std::int64_t i = 0; i < p.n_atoms; ++i) {
        const double dx = b[3 * i] - a[3 * i];
        const double dy = b[3 * i + 1] - a[3 * i + 1];
        const double dz = b[3 * i + 2] - a[3 * i + 2];
        double s = dx * dx + dy * dy;
        s += dz * dz;
        d[i] = std::sqrt(s);
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
    const std::size_t row = static_cast<std::size_t>(p.n_species * nbins);
    const std::size_t total = row * static_cast<std::size_t>(p.n_lags);
    const int nt = threads_for(n_threads, p.n_origins);
    std::vector<std::vector<std::int64_t>> hist(static_cast<std::size_t>(nt));
    {
        py::gil_scoped_release release;
        cpu::parallel_run(nt, [&](int tid) {
            auto& h = hist[static_cast<std::size_t>(tid)];
            h.assign(total, 0);
            // four interleaved copies of one lag's histogram: displacements crowd into a few
            // bins, and consecutive increments of one counter would wait for each other
            std::vector<std::int64_t> scratch(4 * row, 0);
            std::vector<double> d(static_cast<std::size_t>(p.n_atoms));
            std::vector<std::int32_t> guess(static_cast<std::size_t>(p.n_atoms));
            const double top = static_cast<double>(nbins - 1);
            // (locals, not the captured references: an increment of the histogram could
            // alias them, and the compiler would load each again for every atom)
            const std::int64_t n_atoms = p.n_atoms, last = nbins - 1;
            const std::int32_t* const sp = p.species;
            const double* const edge = e;
            const double* const dd = d.data();
            std::int32_t* const gg = guess.data();
            std::int64_t* const sc = scratch.data();
            const std::int64_t srow = static_cast<std::int64_t>(row);
            // every nt-th origin: later origins have fewer lags within the frames
            for (std::int64_t k = tid; k < p.n_origins; k += nt) {
                const std::int64_t t0 = p.origins[k];
                for (std::int64_t j = 0; j < p.n_lags && t0 + p.lags[j] < p.n_frames; ++j) {
                    lengths(p, t0, p.lags[j], d.data());
#pragma omp simd
                    for (std::int64_t i = 0; i < n_atoms; ++i) {
                        double f = (dd[i] - lo) * scale;
                        f = f < 0.0 ? 0.0 : (f > top ? top : f);
                        gg[i] = static_cast<std::int32_t>(f);
                    }
                    for (std::int64_t i = 0; i < n_atoms; ++i) {
                        const double x = dd[i];
                        if (!(x >= lo && x <= hi)) continue;
                        std::int64_t b = gg[i];
                        if (x < edge[b]) --b;
                        else if (b != last && x >= edge[b + 1]) ++b;
                        ++sc[(i & 3) * srow + sp[i] * nbins + b];
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
    const int nt = threads_for(n_threads, p.n_origins);
    {
        py::gil_scoped_release release;
        cpu::parallel_run(nt, [&](int tid) {
            std::vector<double> d(static_cast<std::size_t>(p.n_atoms));
            // every nt-th origin: later origins have fewer lags within the frames
            for (std::int64_t k = tid; k < p.n_origins; k += nt) {
                const std::int64_t t0 = p.origins[k];
                for (std::int64_t j = 0; j < p.n_lags && t0 + p.lags[j] < p.n_frames; ++j) {
                    lengths(p, t0, p.lags[j], d.data());
                    double* s = per_origin.data() + static_cast<std::size_t>(k) * row +
                                static_cast<std::size_t>(j) * lag_row;
                    for (std::int64_t i = 0; i < p.n_atoms; ++i) {
                        const double x = d[static_cast<std::size_t>(i)];
                        double* si = s + static_cast<std::size_t>(p.species[i] * nq);
                        for (std::int64_t m = 0; m < nq; ++m) {
                            const double y = q[m] * x;
                            si[m] += y == 0.0 ? 1.0 : std::sin(y) / y;
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

}  // namespace

void bind_displacements(py::module_& m) {
    m.def("displacement_histogram", &displacement_histogram, py::arg("positions"),
          py::arg("origins"), py::arg("lags"), py::arg("species"), py::arg("n_species"),
          py::arg("edges"), py::arg("out"), py::arg("n_threads") = 0,
          "Add to out (n_species, n_lags, nbins) the counts of |r_i(t0 + lag) - r_i(t0)| over "
          "the origins t0 (t0 + lag a frame), binned as numpy.histogram bins equal bins");
    m.def("sinc_sums", &sinc_sums, py::arg("positions"), py::arg("origins"), py::arg("lags"),
          py::arg("species"), py::arg("n_species"), py::arg("q"), py::arg("n_threads") = 0,
          "(n_species, n_lags, n_q): sums over the origins (t0 + lag a frame) and atoms of "
          "sin(q d) / (q d), d = |r_i(t0 + lag) - r_i(t0)|");
}

}  // namespace fastrdf
