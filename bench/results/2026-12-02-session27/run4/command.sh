#!/usr/bin/env bash
# Session 27 call 4: A = e451979 (the heuristic without l2_prefetch),
# B = 7e31c2b (held rows fetch the row ~6 MB ahead into the L2): the held
# rows A, B, A, B; then, on B, looped rows (one block a row) with
# l2_prefetch at about 2, 4 and 6 MB ahead (overrides: no rebuild, so
# layernorm bf16 16384x8192 gets its min_blocks 4 in the override).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-e451979.tar.xz
  rm -rf /tmp/kiln-$v && mkdir -p /tmp/kiln-$v && xz -dc $f | tar -C /tmp/kiln-$v -xf -
  echo "$v $(cat /tmp/kiln-$v/kiln/COMMIT)"
done
cd $R
held=("softmax(-1) [4096x32768" "layernorm [4096x32768" "softmax(-1) [8192x16384 float32" "rmsnorm [8192x16384" "rmsnorm [16384x8192 float32")
run() { env LD_LIBRARY_PATH=/tmp/kiln-$1/kiln/lib KILN_CACHE_DIR=/tmp/cache-$1 timeout 90 /tmp/kiln-$1/kiln/bin/bench_reduction "${@:2}"; }
for round in 1 2; do
  for v in A B; do
    echo "== $v round $round"
    run $v "${held[@]}" > $v$round.log 2>&1
    grep -h "kiln [0-9] kernel\|FAIL" $v$round.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
  done
done
sweep() { KILN_ROW_CONFIG="$2" run B "$1" > sw.log 2>&1; echo "$2 :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-78)"; cat sw.log >> sweeps.log; }
echo "== looped, B heuristic"
run B "sum(-1) [32768x4096" "sum(-1) [4096x32768" "rmsnorm [32768x4096 float32" "rmsnorm [4096x32768" "cross_entropy [8192x32768" "softmax(-1) [16384x8192 bfloat16" "layernorm [16384x8192 bfloat16" "softmax(-1) [32768x4096 bfloat16" > lh.log 2>&1
grep -h "kiln [0-9] kernel\|FAIL" lh.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-80
# case, row KB
for cr in "sum(-1) [32768x4096 bfloat16:8" "sum(-1) [32768x4096 float32:16" "sum(-1) [4096x32768 bfloat16:64" "sum(-1) [4096x32768 float32:128" \
          "rmsnorm [32768x4096 float32:16" "rmsnorm [4096x32768 float32:128" "rmsnorm [4096x32768 bfloat16:64" "cross_entropy [8192x32768:64" \
          "softmax(-1) [16384x8192 bfloat16:16" "softmax(-1) [32768x4096 bfloat16:8"; do
  c=${cr%:*}; kb=${cr##*:}
  for mb in 2 4 6; do sweep "$c" "{\"l2_prefetch\": $(( mb * 1024 / kb ))}"; done
done
for mb in 2 4 6; do sweep "layernorm [16384x8192 bfloat16" "{\"l2_prefetch\": $(( mb * 1024 / 16 )), \"min_blocks\": 4}"; done
sweep "layernorm [16384x8192 bfloat16" '{"min_blocks": 4}'
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
