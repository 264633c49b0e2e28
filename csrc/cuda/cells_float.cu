// The cell-list kernels in single precision (every rule), every box type.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_ALL_BOXES(FASTRDF_CELLS_INSTANCES_FLOAT, );

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
