// The cell-list kernels of a triclinic box without extra images
// (TriclinicNoImages): both precisions, every rule.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_INSTANCES(, TriclinicNoImages);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
