#!/usr/bin/env bash
# Session 30 call 5: the tuner (KILN_BENCH_TUNE: each case's kernel tuned
# over its config space, now with the column form's split candidates,
# candidates checked against the reference, L2-flushed timing) on the
# column sums: does any config beat the heuristic's one-kernel split by
# the tuner's 1%?
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
env KILN_BENCH_TUNE="$R/tune.json" KILN_CACHE_DIR=/tmp/cache-t timeout 75 $K/bin/bench_reduction \
  "sum(0) [32768x4096 bfloat16]" "sum(0) [32768x4096 float32]" "sum(r*x,0) [32768x4096 bfloat16]" > "$R/bench-tune.log" 2>&1
echo "bench_reduction rc=$?"
grep -h " tuned \|  tuning:\|FAIL" "$R/bench-tune.log" | sed "s/(p95 .*) //" | cut -c1-330
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
