#!/usr/bin/env bash
# Session 28 call 1: pointwise loads with evict_first (config "evict" 1),
# and stores with evict_last too (2), next to torch.compile in rounds
# (anchors_pointwise.py variants), every case at every shape; the plain
# pointwise bench (heuristic) first.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
KILN_STAGES="bench" KILN_BENCHES="pointwise" KILN_VARIANTS=1 KILN_TIMEOUT_BENCH=520 KILN_DEADLINE_S=540 \
  bash scripts/gpu-run.sh "$R/b"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
