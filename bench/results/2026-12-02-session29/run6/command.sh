#!/usr/bin/env bash
# Session 29 call 6: the tuner (KILN_BENCH_TUNE: every kernel of each case
# tuned over its config space, candidates checked against the reference,
# L2-flushed timing) on the cases under 4.0 TB/s or behind an anchor in
# call 4: does any config beat the heuristic by the tuner's 1%?
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
env KILN_BENCH_TUNE="$R/tune.json" KILN_CACHE_DIR=/tmp/cache-t timeout 400 $K/bin/bench_reduction \
  "sum(0) [32768x4096 bfloat16]" "sum(-1) [32768x4096 bfloat16]" "cross_entropy [8192x32768 bfloat16]" \
  "layernorm [32768x4096 float32]" "sum(-1) [32768x4096 float32]" "rmsnorm [4096x32768 float32]" \
  "layernorm [1024x262144 float32]" > "$R/bench-tune.log" 2>&1
echo "bench_reduction rc=$?"
grep -h " tuned \|  tuning:\|FAIL" "$R/bench-tune.log" | grep -v "^JSON\|dynamic" | sed "s/(p95 .*) //" | cut -c1-330
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
