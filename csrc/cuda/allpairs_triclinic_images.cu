// The all-pairs kernels of a triclinic box with extra images
// (TriclinicImages): both precisions, every rule.
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_ALLPAIRS_INSTANCES(, TriclinicImages);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
