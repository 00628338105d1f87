#!/usr/bin/env bash
# Session 26 call 6 (bundle 751372a): do more blocks than 64 KB in flight
# help? min_blocks 5 on the rebuilt 256-thread rows, 10 on layernorm bf16
# 4096 (48 registers), softmax bf16 8192 held at 512 without hints, and the
# one dynamic case the rebuild loses (rmsnorm f32 16384x8192) without it.
# Two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 40 $K/bin/bench_reduction"
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
for round in 1 2; do
  echo "== round $round"
  $B "layernorm [16384x8192 bfloat16" "layernorm [8192x16384 bfloat16" "softmax(-1) [16384x8192 bfloat16" "layernorm [32768x4096 bfloat16" "rmsnorm (dynamic N) [16384x8192 float32" > h$round.log 2>&1
  grep -h "kiln [0-9] kernel\|FAIL" h$round.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
  sweep "layernorm [16384x8192 bfloat16" '{"min_blocks": 5}'
  sweep "layernorm [8192x16384 bfloat16" '{"min_blocks": 5}'
  sweep "softmax(-1) [16384x8192 bfloat16" '{"min_blocks": 5}'
  sweep "softmax(-1) [16384x8192 bfloat16" '{"persistent": 1, "threads": 512, "threads_per_row": 512, "evict": 0}'
  sweep "layernorm [32768x4096 bfloat16" '{"min_blocks": 10}'
  sweep "rmsnorm (dynamic N) [16384x8192 float32" '{"min_blocks": 0}'
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
