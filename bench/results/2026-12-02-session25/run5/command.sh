#!/usr/bin/env bash
# Session 25 call 5 (bundle 3e9d374): one-step entries with predicated
# stores: every dynamic benchmark case; then every [gpu] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
(cd $R && timeout 100 $K/bin/bench_reduction "(dynamic N)" "layernorm [32768x4096" > $R/bench-dyn.log 2>&1); echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-dyn.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-86
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=400 KILN_DEADLINE_S=405 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases in" $R/t/run.log
grep -rh -B2 -A10 "FAILED" $R/t 2>/dev/null | head -40
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
