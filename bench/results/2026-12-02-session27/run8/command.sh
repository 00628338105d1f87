#!/usr/bin/env bash
# Session 27 call 8 (bundle 5a6a0d6): held rows fetching ahead with
# evict_last; do their own loads want evict_first (evict 1: the row's
# lines demoted once read), and does that allow twice the distance?
# Heuristic, {"evict": 1}, {"evict": 1, "l2_prefetch": 2D}; two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
B="timeout 60 $K/bin/bench_reduction"
sweep() { KILN_ROW_CONFIG="$2" $B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
for round in 1 2; do
  echo "== round $round"
  $B "softmax(-1) [4096x32768" "layernorm [4096x32768" "softmax(-1) [8192x16384 float32" "rmsnorm [8192x16384" "rmsnorm [16384x8192 float32" > h$round.log 2>&1
  grep -h "kiln [0-9] kernel\|FAIL" h$round.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
  for cr in "softmax(-1) [4096x32768 bfloat16:96" "layernorm [4096x32768 bfloat16:96" "softmax(-1) [4096x32768 float32:48" "layernorm [4096x32768 float32:48" \
            "softmax(-1) [8192x16384 float32:96" "rmsnorm [8192x16384 bfloat16:192" "rmsnorm [8192x16384 float32:96" "rmsnorm [16384x8192 float32:192"; do
    c=${cr%:*}; d=${cr##*:}
    sweep "$c" '{"evict": 1}'
    sweep "$c" "{\"evict\": 1, \"l2_prefetch\": $(( d * 2 ))}"
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
