#!/usr/bin/env bash
# Session 25 call 2 (bundle 9ec721e): dynamic row lengths with the one-step
# branch: every dynamic benchmark case (call 1 measured 3ca17e3's), then the
# dynamic-length and variant GPU tests.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
cd $R
timeout 120 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn.log 2>&1; echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-dyn.log | sed 's/ kiln 1 kernel(s)//' | cut -c1-100
timeout 400 $K/bin/kiln_tests "rows of a dynamic length match the reference in the vectorized and the scalar entry,long dynamic rows launch a variant built once for them,var and std over several axes with a dynamic dim match the reference" > $R/tests-dyn.log 2>&1; echo "tests rc=$? $SECONDS s"
tail -4 $R/tests-dyn.log
grep -B3 -A12 "FAILED" $R/tests-dyn.log | head -60
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
