#!/usr/bin/env bash
# Session 25 call 6 (bundle HEAD): predicated one-step stores below 512
# threads only; every dynamic benchmark case, then the dynamic-length and
# variant tests.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
(cd $R && timeout 100 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn.log 2>&1); echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-dyn.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-86
timeout 200 $K/bin/kiln_tests "rows of a dynamic length match the reference in the vectorized and the scalar entry,long dynamic rows launch a variant built once for them" > $R/tests-dyn.log 2>&1; echo "tests rc=$? $SECONDS s"
tail -2 $R/tests-dyn.log
grep -B3 -A12 "FAILED" $R/tests-dyn.log | head -40
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
