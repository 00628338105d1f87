#!/usr/bin/env bash
# Session 26 call 1 (bundle e9d37b0 = HEAD at session start): every [gpu]
# test (652f66e's static configs and the review commits had not run on a
# GPU), the static 8192/16384 cases as the heuristic's choice, then
# diagnostic sweeps of layernorm f32 1024x262144 (3.73 TB/s) and
# cross_entropy 8192x32768 (3.84).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=400 KILN_DEADLINE_S=405 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed" $R/t/run.log | head -20
W=/tmp/kiln-bundle; export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 40 $K/bin/bench_reduction"
$B "softmax(-1) [16384x8192" "layernorm [16384x8192" "rmsnorm [16384x8192" "softmax(-1) [8192x16384" "layernorm [8192x16384" "rmsnorm [8192x16384" "layernorm [1024x262144" "cross_entropy [8192x32768" > static.log 2>&1; echo "static rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" static.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
LN="layernorm [1024x262144"
C16='"cluster": 16, "row_loop": 1, "threads": 512, "threads_per_row": 512, "vector": 4, "min_blocks": 0'
sweep "$LN" "{$C16, \"persistent\": 1, \"prefetch\": 1}"
sweep "$LN" "{$C16, \"persistent\": 1, \"prefetch\": 1, \"resident\": 0}"
sweep "$LN" "{$C16, \"persistent\": 1}"
sweep "$LN" "{$C16, \"persistent\": 0, \"unroll\": 4, \"evict\": 1, \"welford\": 1}"
sweep "$LN" "{$C16, \"persistent\": 0, \"unroll\": 4, \"evict\": 1}"
sweep "$LN" '{"cluster": 8, "row_loop": 1, "threads": 512, "threads_per_row": 512, "vector": 4, "min_blocks": 0, "persistent": 0, "unroll": 4, "evict": 1, "welford": 1}'
sweep "$LN" '{"cluster": 16, "row_loop": 1, "threads": 256, "threads_per_row": 256, "vector": 4, "min_blocks": 0, "persistent": 0, "unroll": 4, "evict": 1, "welford": 1}'
KILN_BENCH_NOFLUSH=1 $B "$LN" "cross_entropy [8192x32768" "rmsnorm [1024x262144" > noflush.log 2>&1; echo "noflush: $(grep -h 'kiln [0-9] kernel' noflush.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
