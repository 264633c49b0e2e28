// Host-side API of the CUDA direct k-space sum (csrc/cuda/kspace.cu). Plain C++: the bindings
// compile with the host compiler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fastrdf/kspace.hpp"

namespace fastrdf {
namespace gpu {

// How the last call ran (for tests and benchmarks).
struct KSpaceLaunch {
    long long tasks = 0;        // threads of work: (group, residue of m) pairs
    long long blocks = 0;       // blocks of the main kernel (task blocks x super-chunks)
    int chunk_atoms = 0;        // atoms whose tables a block holds in shared memory at a time
    long long super_chunk = 0;  // atoms one block sums before it writes its partial sums
    long long super_chunks = 0;
    std::size_t table_bytes = 0;
};

// One device's persistent state: buffers grow and are kept from call to call; CUDA is first
// touched by the constructor (never at import).
class KSpaceSums {
   public:
    explicit KSpaceSums(int device);
    ~KSpaceSums();
    KSpaceSums(const KSpaceSums&) = delete;
    KSpaceSums& operator=(const KSpaceSums&) = delete;

    // The sums of every slot of `plan` (kspace.hpp) for the atoms of each species into acc
    // (n_species x plan->slots.size() complex, overwritten). s: n_atoms x 3 fractional
    // coordinates in [-1/2, 1/2].
    void run(const double* s, std::size_t n_atoms, const std::int64_t* offsets, int n_species,
             const std::shared_ptr<const kspace::Plan>& plan, double* acc);
    int device() const;
    const KSpaceLaunch& last_launch() const;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpu
}  // namespace fastrdf
