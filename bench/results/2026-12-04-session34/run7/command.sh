#!/usr/bin/env bash
# Session 34 call 7: rmsnorm f32 4096x32768 (0.999 of torch.compile in call
# 6; torch.compile holds the row at 1024 threads) looped (the heuristic) and
# held, three rounds interleaved; softmax/rmsnorm f32 1024x262144 in
# clusters of 8 x 1024 threads (one block per SM) beside the heuristic's 16 x
# 512 at two per SM.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
n=0
for round in 1 2 3; do
  for cfg in '' '{"persistent":1,"threads":1024,"threads_per_row":1024,"evict":0,"l2_prefetch":48}' \
             '{"persistent":1,"threads":1024,"threads_per_row":1024,"evict":0}' \
             '{"persistent":1,"threads":512,"threads_per_row":512,"evict":0,"l2_prefetch":48}' \
             '{"persistent":0,"threads":1024,"threads_per_row":1024,"unroll":4,"evict":1}'; do
    n=$((n+1)); [ $SECONDS -gt 200 ] && break
    if [ -z "$cfg" ]; then B timeout 30 $K/bin/bench_reduction "rmsnorm [4096x32768 float32" > "$R/bench-$n.log" 2>&1
    else B KILN_ROW_CONFIG="$cfg" timeout 30 $K/bin/bench_reduction "rmsnorm [4096x32768 float32" > "$R/bench-$n.log" 2>&1; fi
    echo "== round $round ${cfg:-heuristic} rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$n.log" | grep -v "copy roof" | cut -c1-100
  done
done
for cfg in '' '{"cluster":8,"threads":1024,"threads_per_row":1024,"min_blocks":1,"prefetch":0}'; do
  n=$((n+1))
  if [ -z "$cfg" ]; then B timeout 40 $K/bin/bench_reduction "softmax(-1) [1024x262144 float32" "rmsnorm [1024x262144 float32" > "$R/bench-$n.log" 2>&1
  else B KILN_ROW_CONFIG="$cfg" timeout 40 $K/bin/bench_reduction "softmax(-1) [1024x262144 float32" "rmsnorm [1024x262144 float32" > "$R/bench-$n.log" 2>&1; fi
  echo "== 262144 ${cfg:-heuristic} rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$n.log" | grep -v "copy roof" | cut -c1-100
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
