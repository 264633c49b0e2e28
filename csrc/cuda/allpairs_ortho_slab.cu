// The all-pairs kernels of an orthorhombic box with a slab condition (OrthoSlabBox, LateralRDF's
// slab): both precisions, every rule. (Double precision runs all in double: no filter units.)
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_ALLPAIRS_INSTANCES(, OrthoSlabBox);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
