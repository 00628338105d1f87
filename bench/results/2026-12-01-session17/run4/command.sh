#!/usr/bin/env bash
# Session 17 call 4: every [gpu] test of kiln_tests and kiln_runtime_tests
# (8 processes at a time, per-case durations), lessons 1, 2, 4.
set -uo pipefail
cd "$(dirname "$0")/.."
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=440 KILN_DEADLINE_S=470 KILN_PACK=1 bash scripts/gpu-run.sh "$OUT/r"
