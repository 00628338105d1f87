#!/usr/bin/env bash
# Session 34 call 1: rows of 1024 x 262144 f32 split across P co-resident
# blocks exchanging through L2 (bench/probes/split_rows.cu, built on the
# development machine with nvcc -arch=sm_90 -O3), next to kiln's held cluster
# rows (bench_reduction, heuristic) and layernorm at 16 x 256, min_blocks 2.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
C=("softmax(-1) [1024x262144 float32]" "layernorm [1024x262144 float32]" "rmsnorm [1024x262144 float32]")
env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache timeout 60 $K/bin/bench_reduction "${C[@]}" > "$R/bench-1.log" 2>&1
echo "== bench heuristic rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-1.log" | grep -v "copy roof" | cut -c1-120
timeout 200 .device/split_rows > "$R/split.log" 2>&1
echo "== split rc=$? $SECONDS s"; cat "$R/split.log"
env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache KILN_ROW_CONFIG='{"cluster":16,"threads":256,"threads_per_row":256,"min_blocks":2,"prefetch":0}' timeout 40 $K/bin/bench_reduction "layernorm [1024x262144 float32]" > "$R/bench-2.log" 2>&1
echo "== bench ln 16x256 mb2 rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-2.log" | grep -v "copy roof" | cut -c1-120
env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache timeout 60 $K/bin/bench_reduction "${C[@]}" > "$R/bench-3.log" 2>&1
echo "== bench heuristic again rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-3.log" | grep -v "copy roof" | cut -c1-120
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
