#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the CPU kernels.
#
# Builds the CPU module only (-DFASTRDF_DISPATCH=OFF: the baseline kernel; -DFASTRDF_CUDA=OFF)
# with -fsanitize=address,undefined into a private target directory, then runs a focused test
# subset against it with libasan preloaded (Python itself is not instrumented). Any ASan
# report aborts the process; UBSan stops at the first finding (halt_on_error=1), so a pass
# means no finding. Leak checking is off: CPython keeps its allocations until exit.
#
#   tests/sanitize_cpu.sh                 # build + the default subset
#   tests/sanitize_cpu.sh tests/test_x.py # build + the given pytest arguments
#
# Environment: PYTHON (default: python3), SANITIZE_TARGET (default: a temporary directory),
# SANITIZE_EXAMPLES (hypothesis examples of the property test, default 60).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
target="${SANITIZE_TARGET:-${TMPDIR:-/tmp}/fastrdf-sanitize}"
flags="-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all -g -O1"

echo "== building the CPU module with ${flags} into ${target}"
rm -rf "${target}"
cd "${repo}"
"${python}" -m pip install --no-deps -q --target "${target}" \
    -C cmake.define.FASTRDF_CUDA=OFF -C cmake.define.FASTRDF_DISPATCH=OFF \
    -C cmake.build-type=RelWithDebInfo \
    -C "cmake.define.CMAKE_CXX_FLAGS=${flags}" \
    -C "cmake.define.CMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined,float-cast-overflow" \
    -C build-dir="${TMPDIR:-/tmp}/fastrdf-sanitize-build" .

libasan="$(${CXX:-g++} -print-file-name=libasan.so)"
libubsan="$(${CXX:-g++} -print-file-name=libubsan.so)"
if [ $# -eq 0 ]; then
    set -- tests/test_kernel.py tests/test_cells.py tests/test_properties.py \
        tests/test_overflow.py tests/test_hostile.py tests/test_interrdf_s.py \
        -k "not adk and not memprot and not past_2_32"
fi
echo "== running pytest $* under ASan/UBSan"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export FASTRDF_HYPOTHESIS_EXAMPLES="${SANITIZE_EXAMPLES:-60}"
LD_PRELOAD="${libasan}:${libubsan}" PYTHONPATH="${target}" \
    "${python}" -m pytest -q -p no:cacheprovider "$@"
echo "== sanitizers found nothing"
