#!/usr/bin/env bash
# Session 27 call 3 (bundle e451979): l2_prefetch distance, finer: D as a
# fraction of the slots S (blocks that fit at once: 264 at two blocks per
# SM, 132 at one) on the held rows of 4096x32768 and on the other held rows
# (softmax f32 8192x16384, rmsnorm bf16 8192x16384, rmsnorm f32 16384x8192
# and 8192x16384). Two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 60 $K/bin/bench_reduction"
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
two="softmax(-1) [4096x32768 bfloat16|layernorm [4096x32768 bfloat16|softmax(-1) [8192x16384 float32|rmsnorm [8192x16384 bfloat16|rmsnorm [16384x8192 float32"
one="softmax(-1) [4096x32768 float32|layernorm [4096x32768 float32|rmsnorm [8192x16384 float32"
for round in 1 2; do
  echo "== round $round"
  $B "softmax(-1) [4096x32768" "layernorm [4096x32768" "softmax(-1) [8192x16384 float32" "rmsnorm [8192x16384" "rmsnorm [16384x8192 float32" > h$round.log 2>&1
  grep -h "kiln [0-9] kernel\|FAIL" h$round.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
  IFS='|' read -ra TWO <<< "$two"; IFS='|' read -ra ONE <<< "$one"
  for c in "${TWO[@]}"; do for d in 33 66 99 132 198; do sweep "$c" "{\"l2_prefetch\": $d}"; done; done
  for c in "${ONE[@]}"; do for d in 16 33 50 66 99; do sweep "$c" "{\"l2_prefetch\": $d}"; done; done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
