#!/usr/bin/env bash
# Build kspace_harness.cpp with the k-space kernels (CPU: csrc/cpu/kspace_kernel.cpp, baseline
# and AVX2; GPU: csrc/cuda/kspace.cu) and run it on the GPU machine:
#   bash benchmarks/gpu_micro/kspace_run.sh        (from the repository root)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${TMPDIR:-/tmp}/kspace_harness; mkdir -p "$B"
FP="-fno-fast-math -ffp-contract=off -fno-math-errno -fno-trapping-math"
nvcc -std=c++17 -arch=sm_90 --fmad=false -prec-sqrt=true -prec-div=true -ftz=false -O3 \
     -Xcompiler=-fPIC,-ffp-contract=off -I"$ROOT/csrc/include" -c "$ROOT/csrc/cuda/kspace.cu" -o "$B/kspace_cu.o"
g++ -O3 -std=gnu++17 $FP -DFASTRDF_ISA=baseline -I"$ROOT/csrc/include" -c "$ROOT/csrc/cpu/kspace_kernel.cpp" -o "$B/kk_baseline.o"
g++ -O3 -std=gnu++17 $FP -mavx2 -mfma -mbmi2 -DFASTRDF_ISA=avx2 -I"$ROOT/csrc/include" -c "$ROOT/csrc/cpu/kspace_kernel.cpp" -o "$B/kk_avx2.o"
g++ -O2 -std=c++17 -I"$ROOT/csrc/include" -c "$ROOT/csrc/cpu/threads.cpp" -o "$B/threads.o"
g++ -O2 -std=c++17 -I"$ROOT/csrc/include" -I"$(dirname "$(which nvcc)")/../include" \
    -c "$ROOT/benchmarks/gpu_micro/kspace_harness.cpp" -o "$B/harness.o"
nvcc -arch=sm_90 "$B"/*.o -o "$B/kspace_harness" -cudart static -lpthread
python - "$B" <<'PY' || echo "(no MDAnalysis here: the adk water case is left out)"
import sys, warnings
import numpy as np
import MDAnalysis as mda
from MDAnalysis.lib.mdamath import triclinic_vectors
from MDAnalysisTests.datafiles import TPR, XTC
warnings.simplefilter("ignore")
u = mda.Universe(TPR, XTC)
np.ascontiguousarray(u.select_atoms("name OW").positions, dtype=np.float64).tofile(sys.argv[1] + "/pos.bin")
triclinic_vectors(u.dimensions).astype(np.float64).tofile(sys.argv[1] + "/box.bin")
PY
nvidia-smi --query-gpu=name --format=csv,noheader || true
"$B/kspace_harness" "$B"
