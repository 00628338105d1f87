#!/usr/bin/env bash
# Session 34 call 4: the other kernels the 256-thread rule for light f32
# rows changes (a whole tensor's sum and sum(x*x) f32 32768x4096, in parts
# of 4096 with a grid tail), 128 threads (the old heuristic) against 256,
# three rounds interleaved, bundle 34b54f1 with KILN_ROW_CONFIG.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
C=("sum [32768x4096 float32" "sum(x*x) [32768x4096 float32" "sum(-1) [32768x4096 float32")
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
for round in 1 2 3; do
  i=0
  for cfg in '' '{"threads":256,"threads_per_row":256}'; do
    i=$((i+1))
    if [ -z "$cfg" ]; then B timeout 40 $K/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$i.log" 2>&1
    else B KILN_ROW_CONFIG="$cfg" timeout 40 $K/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$i.log" 2>&1; fi
    echo "== round $round [$i] ${cfg:-heuristic} rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$round-$i.log" | grep -v "copy roof" | cut -c1-100
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
