#!/usr/bin/env bash
# Session 17 call 3: every [gpu] test (8 processes), then every pointwise
# and reduction benchmark next to the anchors.
set -uo pipefail
cd "$(dirname "$0")/.."
KILN_STAGES="tests bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" \
  KILN_TIMEOUT_TESTS=240 KILN_TIMEOUT_BENCH=140 KILN_TIMEOUT_ANCHORS=220 KILN_DEADLINE_S=560 KILN_PACK=1 \
  bash scripts/gpu-run.sh "$OUT/r"
