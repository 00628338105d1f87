#!/usr/bin/env bash
# Session 33 call 7 (bundle of the commit it prints): the pointwise
# heuristic's 8-byte vectors for three full-size f32 inputs (x*y+z f32):
# every [gpu][pointwise] test, the runtime's and the facade's GPU tests and
# lesson 1, then every pointwise benchmark next to the pointwise anchors and
# floor.cu (issue 3).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== tests ($SECONDS s)"
for t in "kiln_tests [pointwise]" kiln_runtime_tests kiln_facade_tests kiln_facade_workspace_tests lesson_01_bias_gelu; do
  set -- $t
  LD_LIBRARY_PATH=$K/lib timeout 120 $K/bin/$1 ${2:-} > "$R/test-$1.log" 2>&1; echo "$t rc=$? $SECONDS s"
  grep -hE "test cases|FAILED|SKIP|TB/s|check" "$R/test-$1.log" | tail -4
done
echo "=== pointwise next to the anchors ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="pointwise" KILN_ANCHORS="pointwise" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=250 KILN_DEADLINE_S=$((420 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; head -20 "$R/tables.md"
grep -h "launch host cost" "$R/b/bench-pointwise.log" | head -8; grep -h "host_us\|per_node" "$R/b/floor.log" | head -4
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
