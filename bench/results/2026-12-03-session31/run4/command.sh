#!/usr/bin/env bash
# Session 31 call 4: every [gpu] test (kiln_tests, runtime, facade,
# workspace) at this session's kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
xz -dc .device/kiln-bundle.tar.xz | tar -xOf - kiln/COMMIT
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=560 KILN_DEADLINE_S=570 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed" $R/t/run.log | head -20
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
