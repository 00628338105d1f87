#!/usr/bin/env bash
# Session 24 call 3 (bundle HEAD): dynamic row lengths with threads a row by
# the row's bytes (a variant per range), every dynamic case; then every
# [gpu] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
timeout 90 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn.log 2>&1; echo "bench rc=$? $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=440 KILN_DEADLINE_S=445 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases in" $R/t/run.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
