// Host-side API of the CUDA kernels. Plain C++: no CUDA type leaks out, so the Python
// bindings compile with the host compiler and link against the CUDA objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastrdf/kernel_api.hpp"

namespace fastrdf {
namespace gpu {

// A CUDA call failed (the message names the call and CUDA's own error string).
struct CudaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// A device allocation failed.
struct OutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct DeviceInfo {
    int index = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    std::size_t total_memory = 0;
    int multiprocessors = 0;
    std::size_t shared_per_block_optin = 0;
    std::size_t shared_per_multiprocessor = 0;
    std::size_t l2_bytes = 0;
};

// Number of usable devices; 0 (never an exception) when there is no driver or no device, with
// the reason in *why.
int device_count(std::string* why);
DeviceInfo device_info(int device);
int runtime_version();
// The largest relative error of the device's approximate square root (sqrt_approx,
// float_rule.cuh) over every positive normal float, against the double root: measured once per
// device and process (~2e9 evaluations, a few ms), the bound the float filter of double
// precision builds on (kernel_api.hpp, double_filter_delta).
double sqrt_approx_error(int device);
int driver_version();

enum class KernelChoice : int {
    kAuto = kCudaAuto,
    kShared = kCudaShared,
    kGlobal = kCudaGlobal,
    kPacked = kCudaPacked
};

// How the last frame was launched (for tests, benchmarks and --info).
struct LaunchInfo {
    std::string kernel;  // "shared", "packed" (16-bit shared counters) or "global"
    int sweeps = 0;      // passes over the pairs, one bin window each (shared kernel)
    int window = 0;      // bins per window
    int copies = 0;      // sub-histograms per block
    long long tasks = 0; // blocks per sweep
    int threads = 0;
    std::string rule;    // "fast" (approximate root, exact bins), "exact" (IEEE root) or
                         // "filter" (double precision: every pair in float, the pairs near an
                         // edge settled in double)
    std::string method;  // "allpairs" or "cells"
    int cells[3] = {0, 0, 0};  // cell grid (method "cells")
    int cell_k = 0;
    bool dense = false;  // no box or orthorhombic, every pair within r_max (host bound), no
                         // labels, one sweep of shared counters: full tiles off the diagonal
                         // skip the range test
    bool sorted = false; // periodic all-pairs frame put in spatial order (one image per chunk)
    long long image_chunks[3] = {0, 0, 0};  // periodic: warp chunks of j atoms that took one
                                            // image, one index (triclinic), and all, summed
                                            // over the frames of the last synchronize() (set
                                            // there; 0 between accumulate and synchronize)
    double filter_delta = -1.0;  // double precision: the last frame's bound of the float filter
                                 // in bins (double_filter_delta times the scale), < 0: that
                                 // frame ran every pair in double (or single precision)
    long long settled = 0;  // pairs the filter settled in double over the frames of the last
                            // synchronize() (set there)
};

// One device's persistent engine: device buffers, pinned host buffers, streams and events are
// made once and reused; counts stay uint64 on the device until synchronize().
class Histogrammer {
   public:
    // max_window_bins > 0 caps the bins of one shared-memory window (forces several sweeps);
    // exact_sqrt: single precision with the IEEE square root instead of the fast rule;
    // method: Method (kernel_api.hpp); cell_k, cell_order: the cell grid (cells.hpp).
    Histogrammer(int device, KernelChoice kernel, int max_window_bins, bool exact_sqrt,
                 int method = kMethodAuto, int cell_k = 1, int cell_order = kOrderRowMajor);
    ~Histogrammer();
    Histogrammer(const Histogrammer&) = delete;
    Histogrammer& operator=(const Histogrammer&) = delete;

    // Queue one frame (xyz: n_atoms x 3 float32, as given). Returns once the coordinates are
    // copied into pinned memory; the transfer and kernels run asynchronously. Counts of the
    // i == j self pairs (distance 0) go straight into host_out.
    void accumulate(const FrameProblem& p, const float* xyz, std::size_t n_atoms, uint64_t* host_out);
    // Wait for every queued frame and add the device counts into out (n_pairs x nbins of the
    // last accumulate), then reset them to zero.
    void synchronize(uint64_t* out);
    bool pending() const;
    const LaunchInfo& last_launch() const;
    // Double precision through the float filter: the bound is multiplied by this scale (1; 0
    // runs every pair in double, for tests; below 1 makes the filter wrong on purpose).
    double double_filter() const;
    void set_double_filter(double scale);
    int device() const;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpu
}  // namespace fastrdf
