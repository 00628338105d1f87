#!/usr/bin/env bash
# Session 22 call 5: every pointwise and reduction benchmark next to the
# anchors (small batches now also with each kernel's own time after the L2
# flush, from the profiler; launch host cost with bursts interleaved burst by burst).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_TIMEOUT_BENCH=150 \
  KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=480 bash scripts/gpu-run.sh "$R/b" > $R/gpu-run-bench.log 2>&1; echo "bench rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
