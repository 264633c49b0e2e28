// The cell-list kernels without a box (NoBox): both precisions, every rule.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_INSTANCES(, NoBox);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
