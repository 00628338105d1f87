#!/usr/bin/env bash
# Session 27 call 5 (bundle f5c9cff): l2_prefetch's lines at evict_normal
# (l2_normal 1) instead of evict_last: held rows at the heuristic's
# distance (6 MB) and at twice it; looped rows (which lost with evict_last
# in call 4: sums 15-45%) at 6 MB. Heuristic first.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 60 $K/bin/bench_reduction"
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
echo "== heuristic"
$B "softmax(-1) [4096x32768" "layernorm [4096x32768" "softmax(-1) [8192x16384 float32" "rmsnorm [8192x16384" "rmsnorm [16384x8192 float32" \
   "sum(-1) [32768x4096" "sum(-1) [4096x32768" "rmsnorm [4096x32768" "softmax(-1) [16384x8192 bfloat16" "softmax(-1) [32768x4096 bfloat16" > h.log 2>&1
grep -h "kiln [0-9] kernel\|FAIL" h.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
# held: case:rows ahead at 6 MB
for cr in "softmax(-1) [4096x32768 bfloat16:96" "layernorm [4096x32768 bfloat16:96" "softmax(-1) [4096x32768 float32:48" "layernorm [4096x32768 float32:48" \
          "softmax(-1) [8192x16384 float32:96" "rmsnorm [8192x16384 bfloat16:192" "rmsnorm [8192x16384 float32:96" "rmsnorm [16384x8192 float32:192"; do
  c=${cr%:*}; d=${cr##*:}
  sweep "$c" "{\"l2_normal\": 1}"
  sweep "$c" "{\"l2_normal\": 1, \"l2_prefetch\": $(( d * 2 ))}"
done
for cr in "sum(-1) [32768x4096 bfloat16:8" "sum(-1) [32768x4096 float32:16" "sum(-1) [4096x32768 bfloat16:64" "sum(-1) [4096x32768 float32:128" \
          "rmsnorm [4096x32768 float32:128" "rmsnorm [4096x32768 bfloat16:64" "softmax(-1) [16384x8192 bfloat16:16" "softmax(-1) [32768x4096 bfloat16:8"; do
  c=${cr%:*}; kb=${cr##*:}
  sweep "$c" "{\"l2_normal\": 1, \"l2_prefetch\": $(( 6 * 1024 / kb ))}"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
