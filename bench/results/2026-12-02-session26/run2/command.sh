#!/usr/bin/env bash
# Session 26 call 2 (bundle e9d37b0): configs around the heuristic's for the
# static mid-length rows under 4.0 TB/s in call 1 (layernorm bf16 16384x8192
# 3.69, rmsnorm bf16 16384x8192 3.85, softmax bf16 16384x8192 3.98,
# layernorm bf16 8192x16384 3.80): held 512-thread forms, min_blocks,
# other thread counts. Heuristic first and last (drift).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 40 $K/bin/bench_reduction"
CASES=("layernorm [16384x8192 bfloat16" "rmsnorm [16384x8192 bfloat16" "softmax(-1) [16384x8192 bfloat16" "layernorm [8192x16384 bfloat16")
$B "${CASES[@]}" > static1.log 2>&1; echo "static rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" static1.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
P512='"persistent": 1, "threads": 512, "threads_per_row": 512'
for c in "layernorm [16384x8192 bfloat16" "softmax(-1) [16384x8192 bfloat16"; do
  sweep "$c" '{"min_blocks": 4}'
  sweep "$c" '{"threads": 512, "threads_per_row": 512, "unroll": 2}'
  sweep "$c" "{$P512}"
  sweep "$c" "{$P512, \"evict\": 0}"
  sweep "$c" "{$P512, \"min_blocks\": 3}"
done
sweep "layernorm [16384x8192 bfloat16" '{"persistent": 1, "evict": 0}'
sweep "rmsnorm [16384x8192 bfloat16" '{"min_blocks": 4}'
sweep "rmsnorm [16384x8192 bfloat16" '{"threads": 256, "threads_per_row": 256, "unroll": 4}'
sweep "rmsnorm [16384x8192 bfloat16" '{"persistent": 1}'
sweep "rmsnorm [16384x8192 bfloat16" '{"persistent": 1, "evict": 0}'
sweep "rmsnorm [16384x8192 bfloat16" '{"threads": 1024, "threads_per_row": 1024, "unroll": 1}'
sweep "layernorm [8192x16384 bfloat16" '{"min_blocks": 4}'
sweep "layernorm [8192x16384 bfloat16" '{"threads": 512, "threads_per_row": 512, "unroll": 4, "min_blocks": 2}'
sweep "layernorm [8192x16384 bfloat16" "{$P512, \"min_blocks\": 2}"
sweep "layernorm [8192x16384 bfloat16" "{$P512, \"min_blocks\": 2, \"evict\": 0}"
sweep "layernorm [8192x16384 bfloat16" '{"threads": 512, "threads_per_row": 512, "unroll": 2}'
$B "${CASES[@]}" > static2.log 2>&1; echo "static again rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" static2.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
