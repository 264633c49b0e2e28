// Host-side API of the CPU kernels: variant dispatch and machine facts.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>
#include <unistd.h>

#include "fastrdf/kernel_api.hpp"

namespace fastrdf {
namespace cpu {

using KernelFn = void (*)(const FrameProblem&, Workspace&);

std::vector<std::string> compiled_variants();
std::vector<std::string> usable_variants();
std::string default_variant();
KernelFn kernel_for(const std::string& isa);
std::size_t l2_cache_bytes();

// CPUs this process may run on.
int hardware_threads();
// Runs fn(tid), tid = 0 .. n_threads - 1, on a fork-aware thread pool (tid 0 on the caller)
// and returns when every call has returned.
void parallel_run(int n_threads, const std::function<void(int)>& fn);

// Move every position into the primary cell in float32 with the same arithmetic as
// MDAnalysis's distance code (so that distances, and thus counts, agree with InterRDF).
// box: three box vectors as rows (float32, lower triangular as MDAnalysis makes them).
void wrap_ortho(float* xyz, std::size_t n, const float box[3]);
void wrap_triclinic(float* xyz, std::size_t n, const float box[9]);

}  // namespace cpu
}  // namespace fastrdf
