#!/usr/bin/env bash
# Session 36 call 4 (bundle of the commit it prints, c2ab223's kernels):
# softmax / rmsnorm f32 1024x262144 in clusters of 8 (more SMs than the
# heuristic's 16 x 512 at two per SM, which reach 112): 8 x 1024 threads
# prefetching the next row by a bulk copy (one block per SM, 64 registers,
# no spills) and 8 x 512 at two per SM (spilling 612 bytes to local memory,
# which L1 may keep), against the heuristic, rounds interleaved, L2 flushed.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
run() { local tag=$1 cfg=$2; shift 2
  if [ -z "$cfg" ]; then B timeout 90 $K/bin/bench_reduction "$@" > "$R/$tag.log" 2>&1
  else B KILN_ROW_CONFIG="$cfg" timeout 90 $K/bin/bench_reduction "$@" > "$R/$tag.log" 2>&1; fi
  echo "== $tag ${cfg:-heuristic} rc=$? $SECONDS s"; grep -h "TB/s" "$R/$tag.log" | grep -v "copy roof" | cut -c1-100
}
C=("softmax(-1) [1024x262144 float32]" "rmsnorm [1024x262144 float32]")
CFGS=('' '{"threads_per_row":1024,"threads":1024,"vector":4,"persistent":1,"unroll":4,"cluster":8,"row_loop":1,"prefetch":1}' '{"threads_per_row":512,"threads":512,"vector":4,"persistent":1,"unroll":4,"cluster":8,"row_loop":1,"min_blocks":2}')
for round in 1 2; do
  i=0; for cfg in "${CFGS[@]}"; do i=$((i+1)); [ $SECONDS -gt 250 ] && break; run r-$round-$i "$cfg" "${C[@]}"; done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
