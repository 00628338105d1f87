#!/usr/bin/env bash
# Session 36 call 3 (bundle of the commit it prints, c2ab223's kernels =
# HEAD's): every reduction benchmark next to the reduction anchors (issue 4).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== benchmarks ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" \
  KILN_TIMEOUT_BENCH=120 KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=$((560 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; head -27 "$R/tables.md"; grep -A3 "x\*x\|cross_entropy \[" "$R/tables.md" | head -8
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
