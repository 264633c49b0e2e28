// The cell-list kernels in double precision, every box type.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_ALL_BOXES(FASTRDF_CELLS_INSTANCES_DOUBLE, );

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
