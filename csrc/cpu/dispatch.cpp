// Run-time choice of the CPU kernel variant and the cache-blocking size.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/cpu.hpp"

namespace fastrdf {
namespace cpu {

std::size_t block_size(std::size_t l2_bytes, int nbins, int n_pairs) {
    // CADISHI Eq. 6 with reserve = 16 kB: 4 bs^2 + 2 * coord_bytes * bs + 4 * nbins = budget.
    // Here the index buffer holds one row of a tile (bs entries, L1-resident), so the bs^2
    // term sizes the tile, i.e. how much work one task carries, while its coordinates (16 bytes
    // per atom: x, y, z, label) stay cache-resident.
    const double reserve = 16.0 * 1024.0;
    const double hist = 4.0 * (static_cast<double>(nbins) + 16.0) * std::max(1, n_pairs);
    double budget = static_cast<double>(l2_bytes) - reserve - hist;
    budget = std::max(budget, 64.0 * 1024.0);  // wide histograms: keep a useful tile (Eq. 6's "extension")
    const double a = 4.0, b = 2.0 * 16.0;
    double bs = (-b + std::sqrt(b * b + 4.0 * a * budget)) / (2.0 * a);
    bs = std::clamp(bs, 64.0, 4096.0);
    return static_cast<std::size_t>(bs) / 16 * 16;
}

std::vector<std::string> compiled_variants() {
    std::vector<std::string> v;
#ifdef FASTRDF_HAVE_ISA_baseline
    v.push_back("baseline");
#endif
#ifdef FASTRDF_HAVE_ISA_avx2
    v.push_back("avx2");
#endif
#ifdef FASTRDF_HAVE_ISA_avx512
    v.push_back("avx512");
#endif
#ifdef FASTRDF_HAVE_ISA_native
    v.push_back("native");
#endif
    return v;
}

static bool cpu_supports(const std::string& isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                              __builtin_cpu_supports("bmi2");
    if (isa == "avx512")
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == "baseline" || isa == "native";
}

std::vector<std::string> usable_variants() {
    std::vector<std::string> v;
    for (const auto& isa : compiled_variants())
        if (cpu_supports(isa)) v.push_back(isa);
    return v;
}

std::string default_variant() {
    // FASTRDF_CPU_ISA lets tests and benchmarks force a variant.
    if (const char* env = std::getenv("FASTRDF_CPU_ISA")) {
        const std::string want(env);
        if (!want.empty()) {
            const auto ok = usable_variants();
            if (std::find(ok.begin(), ok.end(), want) == ok.end())
                throw std::invalid_argument("FASTRDF_CPU_ISA=" + want +
                                            " is not a compiled variant this CPU supports");
            return want;
        }
    }
    const auto ok = usable_variants();
    if (ok.empty()) throw std::runtime_error("no usable CPU kernel variant was compiled");
    return ok.back();  // listed from most portable to fastest
}

KernelFn kernel_for(const std::string& isa) {
#ifdef FASTRDF_HAVE_ISA_baseline
    if (isa == "baseline") return &baseline::histogram_frame;
#endif
#ifdef FASTRDF_HAVE_ISA_avx2
    if (isa == "avx2") return &avx2::histogram_frame;
#endif
#ifdef FASTRDF_HAVE_ISA_avx512
    if (isa == "avx512") return &avx512::histogram_frame;
#endif
#ifdef FASTRDF_HAVE_ISA_native
    if (isa == "native") return &native::histogram_frame;
#endif
    throw std::invalid_argument("isa: unknown or not compiled CPU kernel variant '" + isa + "'");
}

std::size_t l2_cache_bytes() {
#if defined(_SC_LEVEL2_CACHE_SIZE)
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (v > 0) return static_cast<std::size_t>(v);
#endif
    return 1 << 20;
}

}  // namespace cpu
}  // namespace fastrdf
