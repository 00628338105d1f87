#!/usr/bin/env bash
# Session 34 call 5 (bundle of the commit it prints): every [gpu] test
# (kiln_tests, runtime, facade, workspace) at this session's heuristic (light
# f32 row sums at 256 threads), then, with the time left, every reduction
# benchmark.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=470 KILN_DEADLINE_S=480 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed\|timed out\|passed" $R/t/run.log | head -20
if [ $SECONDS -lt 400 ]; then
  echo "=== benchmarks ($SECONDS s)"
  KILN_STAGES="bench" KILN_BENCHES="reduction" KILN_TIMEOUT_BENCH=140 KILN_DEADLINE_S=$((560 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > $R/bench.log 2>&1; echo "bench rc=$? $SECONDS s"
  grep -h "TB/s" $R/b/bench-reduction.log | grep -v "copy roof" | grep "sum\|262144" | cut -c1-110
fi
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
