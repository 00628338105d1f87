#!/usr/bin/env bash
# Session 17 call 6: the column form's registers (74-92 per thread: 24 warps
# per SM) against min_blocks (launch bounds: 30 registers at 16 blocks of
# 128), sum(0) and sum(r*x,0) at 32768x4096, twice each.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
C='"persistent":0,"threads_per_row":1,"vector":1'
{
for round in 1 2; do
  for cs in "sum(0) [32768x4096 bfloat16]" "sum(r*x,0) [32768x4096 bfloat16]" "sum(0) [32768x4096 float32]" "sum(r*x,0) [32768x4096 float32]"; do
    for cfg in '' "{$C,\"threads\":128,\"unroll\":8,\"min_blocks\":16}" "{$C,\"threads\":128,\"unroll\":4,\"min_blocks\":16}" "{$C,\"threads\":256,\"unroll\":8,\"min_blocks\":8}" "{$C,\"threads\":128,\"unroll\":8,\"min_blocks\":12}"; do
      echo "== $cs ${cfg:-heuristic}"
      if [ -n "$cfg" ]; then KILN_ROW_CONFIG="$cfg" timeout 30 "$K/bin/bench_reduction" "$cs" 2>&1 | grep -E "kiln .*kernel|FAIL|rror"
      else timeout 30 "$K/bin/bench_reduction" "$cs" 2>&1 | grep -E "kiln .*kernel|FAIL|rror"; fi
    done
  done
done
} 2>&1 | tee "$R/ab.log"
cd "$OUT" && tar czf r.tgz r && rm -rf r
