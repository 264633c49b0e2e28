#!/usr/bin/env bash
# One call on an offline GPU machine: install the carried wheels, build for the local GPU,
# then run the stages named on the command line (default: all) and leave logs in $OUT.
#
#   stages: info tests sanitize bench (all sections) bench-SECTION[,SECTION] bench-big
#           cells[:ARGS] (benchmarks/bench_cells.py --device cuda, ARGS ':'-separated)
#           py:SCRIPT[:ARGS] (any script of the repository, e.g. py:benchmarks/bench_species.py:generated)
#           pytest:FILE (one test file, stop at the first failure; FILE relative to tests/, e.g.
#             'pytest:backends/test_feed.py'; a bare name is looked for in tests' folders)
#           tests:GLOB (the test files tests/GLOB, every failure reported; a folder of tests/ by
#             layer, e.g. 'tests:gpu' or 'tests:backends', or a glob, e.g. 'tests:*/test_[a-f]*.py';
#             a glob that matches nothing directly is looked for in tests' folders)
#           tar:DIR (DIR under $OUT packed into DIR.tar.gz: many small files come back as one)
#           env:VAR=VALUE (exported for the stages after it, e.g. env:FASTRDF_CUDA_COMMON_IMAGE=off)
#
# Prepare on a machine with network first (carry .whl and .gpudata with the call; optionally
# .prebuilt, a wheel from tools/prebuild_gpu_wheel.sh, so that nothing is compiled there):
#   bash ../shared/gpu/bundle.sh --dask TPR XTC GRO      # MDAnalysis, dask, the adk data
#   (plus joblib fasteners threadpoolctl tqdm cloudpickle toolz click msgpack wheels)
#
# Results worth keeping: copy the .md logs from $OUT to benchmarks/results/ as one
# results_DATE_MACHINE[_topic].md with the command on top, and index it in
# benchmarks/results/README.md.
set -uo pipefail
OUT=${OUT:-/tmp/fastrdf-out}
mkdir -p "$OUT"
stages=${*:-info tests sanitize bench}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/wheels.log" 2>&1 || { tail "$OUT/wheels.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/.gpudata
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
t0=$(date +%s)
if ls .prebuilt/mdakit_fastrdf-*-cp312-*.whl > /dev/null 2>&1; then
  # a wheel built elsewhere for this Python and GPU (tools/prebuild_gpu_wheel.sh), carried
  # in .prebuilt: saves the build's minutes of device time
  echo "== prebuilt wheel $(ls .prebuilt/*.whl)"
  python3 -m pip install -q --no-index --no-deps --force-reinstall .prebuilt/mdakit_fastrdf-*-cp312-*.whl \
    > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  # the working tree's Python files over the wheel's (its compiled modules stay): a change
  # of Python code needs no new wheel
  site=$(cd /tmp && python3 -c "import mdakit_fastrdf, os; print(os.path.dirname(mdakit_fastrdf.__file__))")
  (cd mdakit_fastrdf && find . -name '*.py' -exec cp --parents {} "$site/" \;)
  echo "   Python files of the working tree copied over the wheel's ($site)"
else
  echo "== build for sm_${arch}"
  python3 -m pip install -q --no-build-isolation --no-deps \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${arch}-real" -C cmake.define.FASTRDF_CUDA=ON . \
    > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi
echo "   installed in $(( $(date +%s) - t0 )) s"
cd /tmp  # import the installed package, not the source tree
src=$OLDPWD
rc=0
# test_paths PATTERN: the paths under $src/tests that PATTERN (a file, folder or glob relative
# to tests/) names; where it names nothing there, what it names in the folders by layer
# (tests/kernels, tests/analysis, ...), so that a bare file name still works
test_paths() {
  local hits
  hits=$(cd "$src/tests" && compgen -G "$1" | sort)
  [ -n "$hits" ] || hits=$(cd "$src/tests" && compgen -G "*/$1" | sort)
  [ -n "$hits" ] || hits=$1  # nothing: pytest says so
  for h in $hits; do printf '%s ' "$src/tests/$h"; done
}
for s in $stages; do
  echo "== $s"
  case $s in
    info)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      python3 -m mdakit_fastrdf --info ;;
    tests:*)
      log=$(echo "${s#tests:}" | tr -c 'A-Za-z0-9_\n' '_')
      python3 -m pytest -q -p no:cacheprovider -rs $(test_paths "${s#tests:}") 2>&1 | tee -a "$OUT/pytest-$log.log" | tail -25
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1 ;;
    tar:*)
      d=${s#tar:}; (cd "$OUT" && tar czf "$d.tar.gz" "$d" && rm -rf "$d") ;;
    tests)
      python3 -m pytest -q -p no:cacheprovider -rs "$src/tests" 2>&1 | tee "$OUT/pytest.log" | tail -25
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1 ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 python3 "$src/tests/sanitize_cuda.py" \
          > "$OUT/sanitize-$tool.log" 2>&1
        r=$?; echo "   $tool: exit $r"; tail -3 "$OUT/sanitize-$tool.log"; [ $r = 0 ] || rc=1
      done ;;
    bench)
      python3 "$src/benchmarks/bench_gpu.py" --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.md" ;;
    bench-*)
      secs=${s#bench-}; tag=${secs//,/-}; secs=${secs//,/ }; secs=${secs//:/ }
      if [ "$secs" = big ]; then secs="kernel --big"; fi
      python3 "$src/benchmarks/bench_gpu.py" $secs --json "$OUT/bench-${tag%%:*}.json" 2>&1 | tee "$OUT/bench-${tag%%:*}.md" ;;
    cells*)
      args=${s#cells}; args=${args#:}; args=${args//:/ }
      python3 "$src/benchmarks/bench_cells.py" --device cuda --no-freud $args 2>&1 | tee -a "$OUT/cells.md" ;;
    py:*)
      args=${s#py:}; args=${args//:/ }; set -- $args; script=$1; shift
      python3 "$src/$script" "$@" 2>&1 | tee -a "$OUT/$(basename "$script" .py).md" ;;
    pytest:*)
      python3 -m pytest -q -p no:cacheprovider -rs -x $(test_paths "${s#pytest:}") 2>&1 | tee -a "$OUT/pytest-part.log" | tail -25
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1 ;;
    env:*)  # env:VAR=VALUE: set for the stages after it (env:VAR= to clear)
      export "${s#env:}"; echo "   export ${s#env:}" ;;
    *) echo "unknown stage $s"; rc=1 ;;
  esac
done
exit $rc
