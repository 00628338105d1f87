#!/usr/bin/env bash
# Session 29 call 5: two row groups per block (config groups 2) in clusters
# of 16 at 1024 threads, one block per SM, against the heuristic, f32
# 1024x262144, two rounds; then the cluster GPU test (its two new group
# configs: rows of 4096 in clusters of 2, 262144 in clusters of 16).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
B=$K/bin/bench_reduction
sweep() { env KILN_ROW_CONFIG="$2" KILN_CACHE_DIR=/tmp/cache-s timeout 90 $B "$1" > sw.log 2>&1; echo "${2:-heuristic} :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-100)"; cat sw.log >> "$R/sweeps.log"; }
cd "$R"
for round in 1 2; do
  echo "=== round $round ($SECONDS s)"
  for op in layernorm rmsnorm "softmax(-1)"; do
    c="$op [1024x262144 float32]"
    sweep "$c" ""
    sweep "$c" '{"cluster": 16, "min_blocks": 0, "groups": 2}'
  done
done
echo "=== cluster test ($SECONDS s)"
timeout 300 $K/bin/kiln_tests "rows split across a thread-block cluster match the reference" > "$R/test-cluster.log" 2>&1; echo "rc=$?"
tail -3 "$R/test-cluster.log"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
