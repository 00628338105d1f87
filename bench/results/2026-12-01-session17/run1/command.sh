#!/usr/bin/env bash
# Session 17 call 1: every [gpu] test (one process per case, 8 at a time);
# the new benchmark cases (sums of expressions, few long rows) next to the
# anchors; few long rows A/B against the previous heuristic's configs.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r
KILN_STAGES="tests bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" \
  KILN_TIMEOUT_TESTS=270 KILN_TIMEOUT_BENCH=110 KILN_TIMEOUT_ANCHORS=200 KILN_DEADLINE_S=520 \
  KILN_REDUCTION_CASES='sum(x*x) sum(r*x,0) sum(0) [8x' KILN_ANCHOR_CASES='sum(x*x) sum(r*x,0) sum(0) [8x' \
  bash scripts/gpu-run.sh "$R"
K=/tmp/kiln-bundle/kiln
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
ab() {  # CASE CONFIG
  echo "== $1 with $2"
  KILN_ROW_CONFIG="$2" timeout 25 "$K/bin/bench_reduction" "$1" 2>&1 | grep -E "kiln .*kernel|flushed|FAIL|rror" | head -4
}
{
for i in 1 2; do
  ab "softmax(-1) [8x32768 bf" '{"persistent":1,"threads":512,"threads_per_row":512,"unroll":4,"vector":8,"min_blocks":2,"cluster":1}'
  ab "softmax(-1) [8x32768 bf" '{"persistent":1,"threads":512,"threads_per_row":512,"unroll":4,"vector":8,"cluster":4,"row_loop":1}'
  ab "rmsnorm [8x32768 bf" '{"persistent":0,"evict":1,"unroll":4,"threads":512,"threads_per_row":512,"vector":8,"cluster":1}'
  ab "softmax(-1) [8x128256 f" '{"persistent":1,"threads":512,"threads_per_row":512,"unroll":4,"vector":4,"cluster":4,"row_loop":1}'
  ab "softmax(-1) [8x32768 bf" '{}'
  ab "softmax(-1) [8x128256 f" '{}'
done
} 2>&1 | tee "$R/ab.log"
cd "$OUT" && tar czf r.tgz r && rm -rf r
