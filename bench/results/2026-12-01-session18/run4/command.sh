#!/usr/bin/env bash
# Session 18 call 4: the lanes GPU test (misaligned bf16 now with outputs of
# x's dtype), then every pointwise and reduction benchmark next to the anchors.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
( cd $R && LD_LIBRARY_PATH=$W/kiln/lib timeout 100 "$W/kiln/bin/kiln_tests" "column reductions whose threads own several adjacent rows (lanes) match the reference" > tests-lanes.log 2>&1; echo "lanes rc=$?"; tail -n 3 tests-lanes.log )
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=240 KILN_DEADLINE_S=500 \
  bash scripts/gpu-run.sh "$R/b" > $R/gpu-run.log 2>&1; echo "gpu-run rc=$?"
tail -n 5 $R/b/run.log
cd "$OUT" && tar czf r.tgz r && rm -rf r
