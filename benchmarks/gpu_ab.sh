#!/usr/bin/env bash
# A/B of two prebuilt wheels in one device call (the same GPU, the same host, one after the
# other): the baseline's figures are measured again beside the change's, as comparisons need.
#
#   bash benchmarks/gpu_ab.sh DIR_A DIR_B STAGES... [-- STAGES_B_ONLY...]
#
# DIR_A, DIR_B: folders holding one wheel each from tools/prebuild_gpu_wheel.sh (git-ignored,
# e.g. .prebuilt_a and .prebuilt_b: carry both). STAGES run with each wheel in turn (the
# stages of benchmarks/gpu_run.sh); those after "--" run with B only (e.g. its tests). Logs go
# to $OUT/a and $OUT/b.
set -uo pipefail
a=$1; b=$2; shift 2
both=(); only=(); seen=0
for s in "$@"; do
  if [ "$s" = "--" ]; then seen=1; continue; fi
  if [ $seen = 0 ]; then both+=("$s"); else only+=("$s"); fi
done
OUT=${OUT:-/tmp/fastrdf-out}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
rc=0
for side in a b; do
  dir=$a; [ $side = b ] && dir=$b
  rm -rf .prebuilt && ln -s "$dir" .prebuilt
  echo "===== $side: $(ls "$dir")"
  stages=("${both[@]}")
  [ $side = b ] && stages+=("${only[@]}")
  OUT="$OUT/$side" bash benchmarks/gpu_run.sh "${stages[@]}" || rc=1
done
rm -f .prebuilt
exit $rc
