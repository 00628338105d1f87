#!/usr/bin/env bash
# Session 29 call 4: every pointwise and reduction benchmark next to the
# anchors at this session's kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=470 bash scripts/gpu-run.sh "$R/b"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
