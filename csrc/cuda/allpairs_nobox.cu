// The all-pairs kernels without a box (NoBox): both precisions, every rule.
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_ALLPAIRS_INSTANCES(, NoBox);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
