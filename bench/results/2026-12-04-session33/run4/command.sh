#!/usr/bin/env bash
# Session 33 call 4: (1) held cluster rows at 1024x262144 f32 (softmax
# 3.975, layernorm 3.811, rmsnorm 4.006 in session 32) with the row's read
# evict_first and/or one cluster per row instead of the row loop, beside the
# heuristic, two rounds; (2) every pointwise benchmark next to the pointwise
# anchors and floor.cu at this commit (issue 3; last run in session 30).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  [ $SECONDS -gt 150 ] && return
  env LD_LIBRARY_PATH=$K/lib ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-125; }
S="softmax(-1) [1024x262144 float32]"; L="layernorm [1024x262144 float32]"; M="rmsnorm [1024x262144 float32]"
for round in 1 2; do
  run "" "$S" "$L" "$M"
  run '{"evict": 1}' "$S" "$L" "$M"
  run '{"row_loop": 0}' "$S" "$M"
  run '{"evict": 1, "row_loop": 0}' "$S" "$M"
done
echo "=== pointwise next to the anchors ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="pointwise" KILN_ANCHORS="pointwise" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=250 KILN_DEADLINE_S=$((560 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; cat "$R/tables.md" | head -40
grep -h -i "launch\|host" "$R/b/bench-pointwise.log" | head -12; grep -h -i "launch\|µs\|us" "$R/b/floor.log" | head -8
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
