#!/usr/bin/env bash
# Session 28 call 5: rows of 4096 values (32768 rows), which the heuristic
# loops, in the held form with the L2 fetch ahead (l2_prefetch at ~6 MB and
# ~3 MB of rows) at 256 and 512 threads, and held without it; overrides on
# the heuristic (KILN_ROW_CONFIG), heuristic first, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
B=$K/bin/bench_reduction
sweep() { env KILN_ROW_CONFIG="$2" KILN_CACHE_DIR=/tmp/cache-s timeout 60 $B "$1" > sw.log 2>&1; echo "${2:-heuristic} :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-84)"; cat sw.log >> "$R/sweeps.log"; }
cd "$R"
for round in 1 2; do
  echo "=== round $round ($SECONDS s)"
  for op in "softmax(-1)" layernorm rmsnorm; do
    for dt in float32 bfloat16; do
      c="$op [32768x4096 $dt]"; V=4; D=384; [ $dt = bfloat16 ] && V=8 && D=768
      sweep "$c" ""
      for T in 256 512; do
        H="\"persistent\": 1, \"row_loop\": 0, \"threads_per_row\": $T, \"threads\": $T, \"vector\": $V, \"unroll\": 4, \"evict\": 0"
        sweep "$c" "{$H, \"l2_prefetch\": $D}"
        sweep "$c" "{$H, \"l2_prefetch\": $((D / 2))}"
      done
      sweep "$c" "{\"persistent\": 1, \"row_loop\": 0, \"threads_per_row\": 256, \"threads\": 256, \"vector\": $V, \"unroll\": 4, \"evict\": 0}"
    done
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
