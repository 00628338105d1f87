#!/usr/bin/env bash
# Session 21 call 3 (bundle b0ed0fb): pointwise kernels whose unrolled vectors
# load first. The [gpu][pointwise] tests (their configs include unroll 2),
# then every pointwise benchmark and the variants (unroll 2 / 4, ...) timed
# next to torch.compile in rounds (anchors_pointwise.py variants).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 200 $K/bin/kiln_tests "[gpu][pointwise]" > $R/tests-pointwise.log 2>&1; echo "tests rc=$? $SECONDS s"
tail -3 $R/tests-pointwise.log
KILN_STAGES="bench" KILN_BENCHES="pointwise" KILN_VARIANTS=1 KILN_TIMEOUT_BENCH=330 KILN_DEADLINE_S=$((540 - SECONDS)) \
  bash scripts/gpu-run.sh "$R/b" > $R/gpu-run.log 2>&1; echo "bench rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
