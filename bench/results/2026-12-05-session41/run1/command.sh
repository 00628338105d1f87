#!/usr/bin/env bash
# Session 41 call 1 (bundle of the commit it prints): every [gpu] test,
# among them the first runs on the GPU of the random graphs
# (tests/test_random_gpu.cpp, 100 graphs from a fresh seed, matmuls among
# them) and of the graphs with matmuls among other ops (planAroundMatmuls).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/t
KILN_STAGES=tests KILN_PACK=1 KILN_DEADLINE_S=560 bash scripts/gpu-run.sh "$R"
echo "rc=$?"
