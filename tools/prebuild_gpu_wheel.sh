#!/usr/bin/env bash
# Build, on this machine, the wheel the lent GPU machines install (CPython 3.12, CUDA kernels
# for one architecture), so that a device call spends no time compiling. The build directory
# is kept, so a rebuild after a change compiles only what changed.
#
#   bash tools/prebuild_gpu_wheel.sh [ARCH]      # ARCH default 90 (H100, H200)
#
# Output: .prebuilt/mdakit_fastrdf-*-cp312-*.whl (git-ignored); carry ".prebuilt" with the
# device call and benchmarks/gpu_run.sh installs it instead of building.
set -euo pipefail
arch=${1:-90}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py=${FASTRDF_PY312:-$(command -v python3.12 || echo python3.12)}
cd "$root"
grep -qx '/.prebuilt/' .git/info/exclude 2>/dev/null || echo '/.prebuilt/' >> .git/info/exclude
rm -rf .prebuilt && mkdir -p .prebuilt
"$py" -m pip wheel --no-deps -w .prebuilt \
  -C build-dir="build/cp312-sm${arch}" \
  -C cmake.define.FASTRDF_CUDA=ON \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${arch}-real" \
  -C cmake.build-type=Release .
ls -l .prebuilt
