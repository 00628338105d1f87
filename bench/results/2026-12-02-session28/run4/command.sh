#!/usr/bin/env bash
# Session 28 call 4: the held form with l2_prefetch (session 27's held-row
# fetch ahead) on the rows the heuristic loops and that are under 4.0 TB/s
# or behind torch.compile: the read-only rows (cross_entropy 8192x32768,
# sums), rmsnorm f32 4096x32768, layernorm f32 32768x4096. Overrides on the
# heuristic (KILN_ROW_CONFIG), heuristic first, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
B=$K/bin/bench_reduction
sweep() { env KILN_ROW_CONFIG="$2" KILN_CACHE_DIR=/tmp/cache-s timeout 60 $B "$1" > sw.log 2>&1; echo "${2:-heuristic} :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-84)"; cat sw.log >> "$R/sweeps.log"; }
cd "$R"
H='"persistent": 1, "row_loop": 0'
for round in 1 2; do
  echo "=== round $round ($SECONDS s)"
  c="cross_entropy [8192x32768"
  sweep "$c" ""
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"min_blocks\": 2, \"l2_prefetch\": 96}"
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"min_blocks\": 2, \"l2_prefetch\": 48}"
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"l2_prefetch\": 96}"
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"min_blocks\": 2}"
  c="sum(-1) [4096x32768 bfloat16]"
  sweep "$c" ""
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"evict\": 0, \"min_blocks\": 2, \"l2_prefetch\": 96}"
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"evict\": 0, \"l2_prefetch\": 96}"
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 8, \"unroll\": 4, \"evict\": 0, \"min_blocks\": 2, \"l2_prefetch\": 48}"
  c="sum(-1) [32768x4096 bfloat16]"
  sweep "$c" ""
  sweep "$c" "{$H, \"threads_per_row\": 256, \"threads\": 256, \"vector\": 8, \"unroll\": 4, \"evict\": 0, \"l2_prefetch\": 768}"
  sweep "$c" "{$H, \"threads_per_row\": 256, \"threads\": 256, \"vector\": 8, \"unroll\": 4, \"evict\": 0, \"l2_prefetch\": 384}"
  c="sum(-1) [32768x4096 float32]"
  sweep "$c" ""
  sweep "$c" "{$H, \"threads_per_row\": 256, \"threads\": 256, \"vector\": 4, \"unroll\": 4, \"l2_prefetch\": 384}"
  sweep "$c" "{$H, \"threads_per_row\": 256, \"threads\": 256, \"vector\": 4, \"unroll\": 4, \"l2_prefetch\": 192}"
  c="rmsnorm [4096x32768 float32]"
  sweep "$c" ""
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 4, \"unroll\": 4, \"evict\": 0, \"l2_prefetch\": 48}"
  sweep "$c" "{$H, \"threads_per_row\": 512, \"threads\": 512, \"vector\": 4, \"unroll\": 4, \"evict\": 0, \"l2_prefetch\": 32}"
  c="layernorm [32768x4096 float32]"
  sweep "$c" ""
  sweep "$c" "{$H, \"threads_per_row\": 256, \"threads\": 256, \"vector\": 4, \"unroll\": 4, \"evict\": 0, \"l2_prefetch\": 384}"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
