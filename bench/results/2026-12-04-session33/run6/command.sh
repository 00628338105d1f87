#!/usr/bin/env bash
# Session 33 call 6: pointwise configs next to torch.compile in rounds
# (bench_pointwise variants, anchors_pointwise.py variants): 256 threads x
# 2-value vectors (torch.compile's pick for x*y+z f32, call 5), 2-value
# vectors, 256 threads, unroll 2, beside the heuristic.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
KILN_STAGES="bench" KILN_BENCHES="pointwise" KILN_VARIANTS=1 \
  KILN_TIMEOUT_BENCH=500 KILN_DEADLINE_S=560 bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
grep -v "^  " "$R/b/anchors-variants.log" | tail -80
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
