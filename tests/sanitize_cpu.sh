#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the CPU kernels.
#
# Builds the CPU module only (-DFASTRDF_CUDA=OFF) with -fsanitize=address,undefined into a
# private target directory, with run-time dispatch on (-DFASTRDF_DISPATCH=ON): the baseline,
# AVX2 and AVX-512 variants of the kernel are all compiled instrumented, and the tests run
# every variant this CPU supports (test_kernel.py's variant comparison runs each on the same
# frames, the property test draws one per example). Before pytest, a check that the module
# Python imports is the one in the target, with every variant compiled; pytest checks it again
# in its own process (FASTRDF_REQUIRE_MODULE_UNDER, tests/conftest.py). An editable install of
# the package in ${PYTHON}'s environment would otherwise win over PYTHONPATH: a
# sitecustomize.py in the target drops its import hook (in the subprocesses too).
#
# The focused tests then run with libasan preloaded (Python itself is not instrumented). Any
# ASan report aborts the process; UBSan stops at the first finding (halt_on_error=1), so a
# pass means no finding. Leak checking is off: CPython keeps its allocations until exit.
#
#   tests/sanitize_cpu.sh                 # build + the default subset
#   tests/sanitize_cpu.sh tests/kernels/test_x.py # build + the given pytest arguments
#
# Environment: PYTHON (default: python3), SANITIZE_TARGET (default: a temporary directory;
# the CMake build goes to SANITIZE_TARGET-build and is reused by the next run),
# SANITIZE_EXAMPLES (hypothesis examples of each property test, default 60).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
target="${SANITIZE_TARGET:-${TMPDIR:-/tmp}/fastrdf-sanitize}"
build_dir="${target}-build"
# -g1: line tables for the reports' stack traces, without the variable tracking of -g that
# costs a fifth of the compile time of the -O3 kernel variants.
# -DFASTRDF_CHECK_CERTIFIED: every pair of a block that took one image for a run of a cell
# (histogram.cpp, certify_blocks) is checked against its own image, bit for bit.
# -DFASTRDF_CHECK_FILTER: every pair that double precision's float filter does not send to
# double is checked against the all-double range decision and bin.
flags="-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all -g1 -O1 -DFASTRDF_CHECK_CERTIFIED -DFASTRDF_CHECK_FILTER"

echo "== building the CPU module (all SIMD variants) with ${flags} into ${target}"
rm -rf "${target}"
cd "${repo}"
"${python}" -m pip install --no-deps -q --target "${target}" \
    -C cmake.define.FASTRDF_CUDA=OFF -C cmake.define.FASTRDF_DISPATCH=ON \
    -C cmake.define.FASTRDF_NATIVE=OFF \
    -C cmake.build-type=RelWithDebInfo \
    -C "cmake.define.CMAKE_CXX_FLAGS=${flags}" \
    -C "cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
    -C "cmake.define.CMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined,float-cast-overflow" \
    -C build-dir="${build_dir}" .

cat > "${target}/sitecustomize.py" <<'EOF'
# Written by tests/sanitize_cpu.sh: drop the import hook of an editable install of
# mdakit_fastrdf, so that PYTHONPATH's instrumented build is the one imported.
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "mdakit_fastrdf" not in type(f).__module__]
EOF

libasan="$(${CXX:-g++} -print-file-name=libasan.so)"
libubsan="$(${CXX:-g++} -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export FASTRDF_HYPOTHESIS_EXAMPLES="${SANITIZE_EXAMPLES:-60}"
export FASTRDF_REQUIRE_MODULE_UNDER="${target}"
export LD_PRELOAD="${libasan}:${libubsan}"
export PYTHONPATH="${target}"

echo "== checking that Python imports the instrumented module"
(cd "${target}" && "${python}" -c '
import os, platform, sys
from mdakit_fastrdf.engine import _fastrdf_cpu as m
target, got = os.path.realpath(sys.argv[1]), os.path.realpath(m.__file__)
assert got.startswith(target + os.sep), f"imported {got}, not the build in {target}"
compiled = list(m.compiled_variants())
if platform.machine() in ("x86_64", "AMD64", "amd64"):
    assert compiled == ["baseline", "avx2", "avx512"], f"compiled variants: {compiled}"
print(f"{got}: variants {compiled}, this CPU runs {list(m.usable_variants())}")
' "${target}")

# (No test that forks worker processes: under ASan a child forked while another thread of the
# parent - multiprocessing's pool handlers, the kernels' thread pool - holds the sanitizer
# allocator's lock waits for it for ever; seen as a hang of test_parallel_blocks_identical.
# The main suite runs those tests without ASan; the kernels they call run here serially.)
if [ $# -eq 0 ]; then
    set -- tests/kernels/test_kernel.py tests/kernels/test_cells.py \
        tests/kernels/test_double_filter.py tests/kernels/test_properties.py \
        tests/kernels/test_overflow.py tests/analysis/test_hostile.py \
        tests/analysis/test_interrdf_s.py tests/kernels/test_kspace.py \
        tests/analysis/test_slab.py tests/kernels/test_displacements.py \
        -k "not adk and not memprot and not past_2_32 and not parallel_ and not backends_and_blocks"
fi
echo "== running pytest $* under ASan/UBSan"
"${python}" -m pytest -q -p no:cacheprovider "$@"
echo "== sanitizers found nothing"
