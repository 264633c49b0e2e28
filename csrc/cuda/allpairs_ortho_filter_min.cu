// The all-pairs kernels of the float filter (from r_min > 0; double precision through
// float kernels, filter.cuh) in the box OrthoBox.
#include "allpairs_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_FILTER_INSTANCE(FASTRDF_ALLPAIRS_LAUNCHER, , OrthoBox, FilterFromMin);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
