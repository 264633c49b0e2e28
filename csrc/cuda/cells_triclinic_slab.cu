// The cell-list kernels of a triclinic box with a slab condition (TriclinicSlab, LateralRDF's
// slab): both precisions, every rule. (Double precision runs all in double: no filter units.)
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_INSTANCES(, TriclinicSlab);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
