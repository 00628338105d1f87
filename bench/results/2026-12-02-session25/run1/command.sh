#!/usr/bin/env bash
# Session 25 call 1 (bundle 3ca17e3 = HEAD at session start): every [gpu]
# test (session 24's last rule change and review commit had not run on a
# GPU), then the dynamic row-length benchmark cases.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=430 KILN_DEADLINE_S=435 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed" $R/t/run.log | head -20
W=/tmp/kiln-bundle; export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 90 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn.log 2>&1; echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-dyn.log | cut -c1-112
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
