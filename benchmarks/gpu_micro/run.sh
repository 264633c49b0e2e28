#!/usr/bin/env bash
# Build and run pair_micro.cu on the GPU machine; SASS instruction mix of each variant's loop.
set -uo pipefail
OUT=${OUT:-/tmp/micro-out}; mkdir -p "$OUT"
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
nvcc -O3 -arch=sm_90 --fmad=false -I../../csrc/include -Xptxas -v pair_micro.cu -o /tmp/pair_micro > "$OUT/ptxas.log" 2>&1 || { cat "$OUT/ptxas.log"; exit 1; }
grep -E "registers|Compiling" "$OUT/ptxas.log" | paste - - | sed 's/ptxas info    ://g' | cut -c1-200 | head -20
cuobjdump -sass /tmp/pair_micro > "$OUT/sass.txt" 2>&1
# per kernel: instructions in the whole function, and the opcode histogram
awk '/Function :/{f=$3} /^ +\/\*[0-9a-f]+\*\//{split($0,a,"[*]/"); op=a[2]; gsub(/^ +/,"",op); split(op,b," "); o=b[1]; if(o ~ /^@/) o=b[2]; sub(/\..*/,"",o); c[f" "o]++} END{for(k in c) print k, c[k]}' "$OUT/sass.txt" | sort > "$OUT/opcodes.txt"
/tmp/pair_micro "$@" | tee "$OUT/micro.md"
