#!/usr/bin/env bash
# Session 37 call 1 (bundle of the commit it prints, f5f31c2): every [gpu]
# test, the lessons and the AOT tests at HEAD -- the first device run of
# db730ee (the facade's prepare() built from detail::planLaunches).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
echo "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo)"
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=$((560 - SECONDS)) KILN_DEADLINE_S=$((570 - SECONDS)) bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed\|timed out\|skipp\|passed" $R/t/run.log | head -40
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
