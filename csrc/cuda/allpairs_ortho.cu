// The all-pairs kernels of an orthorhombic box (OrthoBox): both precisions, every rule.
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_ALLPAIRS_INSTANCES(, OrthoBox);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
