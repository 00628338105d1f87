#!/usr/bin/env bash
# Session 47 call 2: racecheck and synccheck on the row-softmax form with its
# cluster barrier before exit (b1dec3a), the form's whole [gpu] test, then
# every reduction benchmark next to the reduction anchors (issue 4).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
for tool in racecheck synccheck; do
  KILN_ROW_SOFTMAX_CASES=5 KILN_CACHE_DIR=$(mktemp -d) timeout 50 compute-sanitizer --tool $tool $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $SECONDS s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $R/san-$tool.log | tail -3
done
KILN_CACHE_DIR=$(mktemp -d) timeout 90 $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/rowform.log 2>&1
echo "row form rc=$? $SECONDS s"; tail -2 $R/rowform.log | head -1
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_TIMEOUT_BENCH=130 \
  KILN_TIMEOUT_ANCHORS=$((545 - SECONDS - 135)) KILN_DEADLINE_S=$((548 - SECONDS)) bash .device/gpu-run.sh "$R/b" > $R/gpu-run.out 2>&1
echo "gpu-run rc=$? $SECONDS s"; tail -5 $R/gpu-run.out
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
