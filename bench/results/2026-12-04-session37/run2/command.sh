#!/usr/bin/env bash
# Session 37 call 2 (bundle of the commit it prints, f5f31c2):
# every pointwise benchmark next to the pointwise anchors and
# floor.cu, and the launch host cost (issue 3).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== pointwise next to the anchors ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="pointwise" KILN_ANCHORS="pointwise" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=250 KILN_DEADLINE_S=$((450 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; head -20 "$R/tables.md"
grep -h "launch host cost" "$R/b/bench-pointwise.log" | head -8; grep -h "host_us\|per_node" "$R/b/floor.log" | head -4
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
