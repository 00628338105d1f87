#!/usr/bin/env bash
# Session 35 call 7 (bundle c2ab223, the session's last kernels): the
# lessons (skipped at call 5's test cap), the facade's GPU tests and the
# reduction tests with multi-kernel graphs.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache
for t in lesson_00_graphs lesson_01_bias_gelu lesson_02_row_reductions lesson_04_linear "lesson_03_tuning $R/ship" \
         kiln_facade_tests kiln_facade_workspace_tests; do
  [ $SECONDS -gt 200 ] && break
  set -- $t
  timeout 90 $K/bin/$1 ${2:-} > "$R/$1.log" 2>&1; echo "== $t rc=$? $SECONDS s"
  grep -hE "test cases|FAILED|passed|failed|check|TB/s|cannot" "$R/$1.log" | tail -3
done
timeout 90 $K/bin/kiln_tests "graphs split into several kernels match the reference" > "$R/kiln_tests.log" 2>&1
echo "== kiln_tests (multi-kernel graphs) rc=$? $SECONDS s"; tail -3 "$R/kiln_tests.log"
rm -rf "$R/ship/kernels"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
