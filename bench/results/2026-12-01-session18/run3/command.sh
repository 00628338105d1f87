#!/usr/bin/env bash
# Session 18 call 3: every [gpu] test (parallel, scripts/gpu-run.sh tests
# stage), the compile tests that failed here before (resource reports), then
# the column cases (heuristic: lanes) next to torch.compile, twice.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=330 KILN_DEADLINE_S=340 bash scripts/gpu-run.sh $R/t > $R/gpu-run.log 2>&1; echo "gpu-run rc=$?"
tail -n 25 $R/t/run.log 2>/dev/null
W=/tmp/kiln-bundle; K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
( cd $R && timeout 60 "$K/bin/kiln_tests" "every reduction op along the last axis*" > tests-resources.log 2>&1; echo "resources rc=$?"; tail -n 3 tests-resources.log )
echo "== columns $SECONDS s"
for round in 1 2; do
  for cs in "sum(0) [32768x4096" "sum(r*x,0) [32768x4096"; do timeout 60 "$K/bin/bench_reduction" "$cs" 2>&1 | grep -E "kiln .*kernel|FAIL|rror"; done
done | tee $R/columns.log
( cd $K/anchors && OUT=$R KILN_ANCHOR_BUDGET_S=100 timeout 150 python3 anchors_reduction.py "sum(0) [" "sum(r*x,0) [" > $R/anchors.log 2>&1; echo "anchors rc=$?" )
grep -E "torch.compile" $R/anchors.log | head
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
