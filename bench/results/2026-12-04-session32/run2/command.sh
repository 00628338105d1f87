#!/usr/bin/env bash
# Session 32 call 2: the looped-cluster GPU test with its check fixed
# (call 1: every composite matched the reference; the cluster check read
# the base build for rmsnorm, whose dims are N first), then every reduction
# benchmark next to the reduction anchors.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== tests ($SECONDS s)"
LD_LIBRARY_PATH=$K/lib timeout 90 stdbuf -oL $K/bin/kiln_tests -d yes "long dynamic rows*" > "$R/tests.log" 2>&1; echo "rc=$?"
grep -E "passed|failed|FAILED" "$R/tests.log" | tail -5
cp "$R/tests.log" "$OUT/tests.log"
echo "=== benchmarks ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" \
  KILN_TIMEOUT_BENCH=130 KILN_TIMEOUT_ANCHORS=240 KILN_DEADLINE_S=$((400 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; grep -i "dynamic N" "$R/tables.md" | head -30
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
