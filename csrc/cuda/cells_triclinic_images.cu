// The cell-list kernels of a triclinic box with extra images
// (TriclinicImages): both precisions, every rule.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_INSTANCES(, TriclinicImages);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
