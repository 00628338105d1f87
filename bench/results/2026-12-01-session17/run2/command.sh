#!/usr/bin/env bash
# Session 17 call 2: every [gpu] test of kiln_tests and kiln_runtime_tests,
# one process per case, 8 at a time; lessons 1, 2, 4.
set -uo pipefail
cd "$(dirname "$0")/.."
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=520 KILN_DEADLINE_S=540 KILN_PACK=1 bash scripts/gpu-run.sh "$OUT/r"
