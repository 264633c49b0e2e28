// The cell-list kernels of the float filter (from r_min > 0; double precision through
// float kernels, filter.cuh) in the box TriclinicImages.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_FILTER_INSTANCE(FASTRDF_CELLS_LAUNCHER, , TriclinicImages, FilterFromMin);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
