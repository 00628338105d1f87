#!/usr/bin/env bash
# Session 21 call 1 (bundle 7931dc9): every pointwise and reduction benchmark
# next to the anchors (launch cost now beside raw launches of an empty NVRTC
# kernel), then every [gpu] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_TIMEOUT_BENCH=150 \
  KILN_TIMEOUT_ANCHORS=240 KILN_DEADLINE_S=300 bash scripts/gpu-run.sh "$R/b" > $R/gpu-run-bench.log 2>&1; echo "bench rc=$? $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=330 KILN_DEADLINE_S=$((560 - SECONDS)) bash scripts/gpu-run.sh "$R/t" > $R/gpu-run-tests.log 2>&1; echo "tests rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
