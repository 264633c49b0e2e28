// The cell-list kernels of an orthorhombic box (OrthoBox): both precisions, every rule.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_INSTANCES(, OrthoBox);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
