#!/usr/bin/env bash
# Session 34 call 3: f32 row sums (one pass, nothing written along the row)
# at 128 threads a row (the heuristic) against 256 and 512, every f32 sum
# case of bench_reduction, rounds interleaved; torch.compile's sum f32
# 32768x4096 runs 512 threads, one row a block (call 2's probe).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
C=("sum(-1) [32768x4096 float32" "sum(-1) [4096x32768 float32" "sum(-1) [1024x262144 float32")
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
for round in 1 2 3; do
  i=0
  for cfg in '' '{"threads":256,"threads_per_row":256}' '{"threads":512,"threads_per_row":512,"unroll":2}' '{"threads":512,"threads_per_row":512}'; do
    i=$((i+1)); [ $SECONDS -gt 240 ] && break
    if [ -z "$cfg" ]; then B timeout 40 $K/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$i.log" 2>&1
    else B KILN_ROW_CONFIG="$cfg" timeout 40 $K/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$i.log" 2>&1; fi
    echo "== round $round [$i] ${cfg:-heuristic} rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$round-$i.log" | grep -v "copy roof" | cut -c1-100
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
