// The all-pairs kernels of a triclinic box without extra images
// (TriclinicNoImages): both precisions, every rule.
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_ALLPAIRS_INSTANCES(, TriclinicNoImages);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
