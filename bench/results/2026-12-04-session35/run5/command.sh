#!/usr/bin/env bash
# Session 35 call 5 (bundle of the commit it prints): every [gpu] test at
# the session's last kernels (a looped row's picked logit loaded after its
# loop, bb98d48), then
# every reduction benchmark next to the reduction anchors.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=330 KILN_DEADLINE_S=340 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed\|timed out" $R/t/run.log | head -20
echo "=== benchmarks ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" \
  KILN_TIMEOUT_BENCH=120 KILN_TIMEOUT_ANCHORS=200 KILN_DEADLINE_S=$((575 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; head -27 "$R/tables.md"; grep -A3 "x\*x\|cross_entropy \[" "$R/tables.md" | head -8
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
