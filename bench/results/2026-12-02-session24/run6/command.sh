#!/usr/bin/env bash
# Session 24 call 6 (bundle HEAD): the dynamic-length tests and every
# dynamic case under the final heuristic (f32 exps at unroll 8 in the
# 512-thread range).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 90 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn.log 2>&1; echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel" $R/bench-dyn.log | cut -c1-110
T="long dynamic rows launch a variant built once for them,rows of a dynamic length match the reference*,*every reduction op*"
timeout 300 $K/bin/kiln_tests "$T" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
tail -3 $R/tests.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
