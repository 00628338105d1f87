#!/usr/bin/env bash
# Session 36 call 7 (bundle of the commit it prints): kernels compiled ahead
# of time by `kiln aot` (kiln_aot_tests, a binary without the compiler),
# then every [gpu] test (the facade's resident-block cap now comes from the
# runtime's rt::residentBlocks).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
ldd $K/bin/kiln_aot_tests > "$R/aot-ldd.txt" 2>&1; grep -c kiln_compiler "$R/aot-ldd.txt"
LD_LIBRARY_PATH=$K/lib timeout 120 $K/bin/kiln_aot_tests "[gpu]" --durations yes > "$R/aot.log" 2>&1; echo "aot [gpu] rc=$? $SECONDS s"; tail -4 "$R/aot.log"
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=$((560 - SECONDS)) KILN_DEADLINE_S=$((570 - SECONDS)) bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed\|timed out\|skipp" $R/t/run.log | head -30
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
