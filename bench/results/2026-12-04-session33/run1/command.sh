#!/usr/bin/env bash
# Session 33 call 1: held dynamic rows (persistent + one_step: the one-step
# entry holds the row, every slot predicated on the launched length).
# 1) the GPU test of dynamic rows (now with a held override) and the other
#    one-step / variant tests; 2) bench_reduction's dynamic cases with held
#    overrides beside the heuristic (and the static kernels) in one process
#    each, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
echo "=== tests ($SECONDS s)"
timeout 200 stdbuf -oL $K/bin/kiln_tests -d yes "rows of a dynamic length match*" "long dynamic rows*" > "$R/tests.log" 2>&1; echo "rc=$?"
grep -E "^[0-9.]+ s:|test cases|FAILED" "$R/tests.log" | tail -8
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  [ $SECONDS -gt 540 ] && return
  env ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-125; grep -h "config {\|kiln_row0:" "$R/bench-$i.log" | cut -c1-200 | head -4; }
LB32="layernorm (dynamic N) [4096x32768 bfloat16]"; SB32="softmax(-1) (dynamic N) [4096x32768 bfloat16]"
SF32="softmax(-1) (dynamic N) [4096x32768 float32]"; LB16="layernorm (dynamic N) [8192x16384 bfloat16]"
LF32="layernorm (dynamic N) [4096x32768 float32]"; RB16="rmsnorm (dynamic N) [8192x16384 bfloat16]"
for round in 1 2; do
echo "=== round $round ($SECONDS s)"
run "" "$LB32" "$SB32" "$SF32" "$LB16" "$LF32" "layernorm [4096x32768 bfloat16]" "softmax(-1) [4096x32768 bfloat16]" "layernorm [8192x16384 bfloat16]"
run '{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 8, "unroll": 4, "evict": 1}' "$LB32" "$SB32"
run '{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 8, "unroll": 4, "evict": 1, "l2_prefetch": 96}' "$LB32" "$SB32"
run '{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 16, "unroll": 4, "evict": 1}' "$SF32" "$LF32"
run '{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 16, "unroll": 4, "evict": 1, "l2_prefetch": 48}' "$SF32"
run '{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 4, "unroll": 4, "evict": 1}' "$LB16" "$RB16"
run '{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 4, "unroll": 4, "evict": 1, "l2_prefetch": 192}' "$LB16" "$RB16"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
