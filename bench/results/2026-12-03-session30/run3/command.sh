#!/usr/bin/env bash
# Session 30 call 3: every pointwise and reduction benchmark next to the
# anchors at this session's kernels (column reductions in one kernel,
# layernorm f32 1024x262144's rebuild).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
xz -dc .device/kiln-bundle.tar.xz | tar -xOf - kiln/COMMIT
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=470 bash scripts/gpu-run.sh "$R/b"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
