// The all-pairs kernels of an orthorhombic box in MDAnalysis's brute-force arithmetic
// (OrthoBoxScaled): both precisions, every rule.
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_ALLPAIRS_INSTANCES(, OrthoBoxScaled);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
