// The direct k-space sum on the CPU: the variant of the kernel (csrc/cpu/kspace_kernel.cpp,
// compiled per instruction set) for the instruction set the histogram kernel uses.
#include <stdexcept>
#include <string>

#include "fastrdf/cpu.hpp"
#include "fastrdf/kspace.hpp"

namespace fastrdf {
namespace cpu {

KSpaceFn kspace_kernel_for(const std::string& isa) {
#ifdef FASTRDF_HAVE_ISA_baseline
    if (isa == "baseline") return &baseline::kspace_sums;
#endif
#ifdef FASTRDF_HAVE_ISA_avx2
    if (isa == "avx2") return &avx2::kspace_sums;
#endif
#ifdef FASTRDF_HAVE_ISA_avx512
    if (isa == "avx512") return &avx512::kspace_sums;
#endif
#ifdef FASTRDF_HAVE_ISA_native
    if (isa == "native") return &native::kspace_sums;
#endif
    throw std::invalid_argument("isa: unknown or not compiled CPU kernel variant '" + isa + "'");
}

}  // namespace cpu
}  // namespace fastrdf
