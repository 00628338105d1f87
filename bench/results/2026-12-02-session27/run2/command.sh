#!/usr/bin/env bash
# Session 27 call 2 (bundle e451979): held rows of 4096x32768 with the row
# D rows ahead prefetched into the L2 (row config l2_prefetch), D around a
# wave of blocks (bf16: 2 blocks/SM = 264; f32: 1 block/SM = 132), against
# the heuristic. Two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 60 $K/bin/bench_reduction"
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
for round in 1 2; do
  echo "== round $round"
  $B "softmax(-1) [4096x32768" "layernorm [4096x32768" > h$round.log 2>&1
  grep -h "kiln [0-9] kernel\|FAIL" h$round.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
  for d in 132 264 528; do
    sweep "softmax(-1) [4096x32768 bfloat16" "{\"l2_prefetch\": $d}"
    sweep "layernorm [4096x32768 bfloat16" "{\"l2_prefetch\": $d}"
  done
  for d in 66 132 264; do
    sweep "softmax(-1) [4096x32768 float32" "{\"l2_prefetch\": $d}"
    sweep "layernorm [4096x32768 float32" "{\"l2_prefetch\": $d}"
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
