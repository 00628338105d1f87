#!/usr/bin/env bash
# Session 36 call 1 (bundle of the commit it prints, c2ab223's kernels =
# HEAD's): cross_entropy bf16 8192x32768's row loop at max_blocks 1024
# (eight rows for every block) against the heuristic's 1188 blocks (9 a SM:
# 1064 blocks run seven rows, 124 six), rounds interleaved, L2 flushed;
# then every [gpu] test (session 35 ran the whole suite only at bb98d48).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
run() { local tag=$1 cfg=$2; shift 2
  if [ -z "$cfg" ]; then B timeout 60 $K/bin/bench_reduction "$@" > "$R/$tag.log" 2>&1
  else B KILN_ROW_CONFIG="$cfg" timeout 60 $K/bin/bench_reduction "$@" > "$R/$tag.log" 2>&1; fi
  echo "== $tag ${cfg:-heuristic} rc=$? $SECONDS s"; grep -h "TB/s" "$R/$tag.log" | grep -v "copy roof" | cut -c1-100
}
CE=("cross_entropy [8192x32768 bfloat16]")
CFGS=('' '{"threads_per_row":128,"threads":128,"vector":8,"unroll":4,"row_loop":1,"max_blocks":1024}' '{"threads_per_row":128,"threads":128,"vector":8,"unroll":8,"row_loop":1,"max_blocks":1024}')
for round in 1 2; do
  i=0; for cfg in "${CFGS[@]}"; do i=$((i+1)); [ $SECONDS -gt 100 ] && break; run ce-$round-$i "$cfg" "${CE[@]}"; done
done
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=$((560 - SECONDS)) KILN_DEADLINE_S=$((570 - SECONDS)) bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed\|timed out\|skipp" $R/t/run.log | head -30
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
