#!/usr/bin/env bash
# Session 29 call 3: every [gpu] test at this session's kernels (weights
# resident beside a prefetched row; f32 rows of 4096 held, fetching ahead).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
xz -dc .device/kiln-bundle.tar.xz | tar -xOf - kiln/COMMIT
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=380 KILN_DEADLINE_S=385 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed" $R/t/run.log | head -20
grep -rh "^tuning " $R/t | cut -c1-300
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
