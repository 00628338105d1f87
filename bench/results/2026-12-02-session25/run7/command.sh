#!/usr/bin/env bash
# Session 25 call 7 (bundle HEAD): static rows of 8192 and 16384 values
# (no anchor row has them): the heuristic's configs, then the suspects
# (512-thread configs of 64+ registers: one block per SM) against
# min_blocks 2, 256 threads, looped forms.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 40 $K/bin/bench_reduction"
$B "softmax(-1) [16384x8192" "layernorm [16384x8192" "rmsnorm [16384x8192" "softmax(-1) [8192x16384" "layernorm [8192x16384" "rmsnorm [8192x16384" > static.log 2>&1; echo "static rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" static.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
sweep "softmax(-1) [8192x16384 bfloat16" '{"min_blocks": 2}'
sweep "softmax(-1) [8192x16384 bfloat16" '{"threads_per_row": 256, "threads": 256}'
sweep "layernorm [8192x16384 bfloat16" '{"min_blocks": 2}'
sweep "layernorm [8192x16384 bfloat16" '{"threads_per_row": 256, "threads": 256}'
sweep "layernorm [16384x8192 float32" '{"min_blocks": 2}'
sweep "layernorm [16384x8192 float32" '{"threads_per_row": 256, "threads": 256}'
sweep "layernorm [8192x16384 float32" '{"persistent": 0, "threads_per_row": 512, "threads": 512, "unroll": 4, "evict": 1}'
sweep "rmsnorm [8192x16384 float32" '{"persistent": 0, "threads_per_row": 1024, "threads": 1024, "unroll": 4, "evict": 1}'
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
