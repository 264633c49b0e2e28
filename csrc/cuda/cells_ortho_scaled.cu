// The cell-list kernels of an orthorhombic box in MDAnalysis's brute-force arithmetic
// (OrthoBoxScaled): both precisions, every rule.
#include "cells_kernels.cuh"

namespace fastrdf {
namespace gpu {
namespace detail {

FASTRDF_CELLS_INSTANCES(, OrthoBoxScaled);

}  // namespace detail
}  // namespace gpu
}  // namespace fastrdf
