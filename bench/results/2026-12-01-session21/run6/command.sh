#!/usr/bin/env bash
# Session 21 call 6 (and 7, after the scalar-entry fix): the new GPU test of unrolled pointwise vectors (whole and
# partial chunks, aligned and unaligned), then every [gpu][pointwise] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 200 $K/bin/kiln_tests "[gpu][pointwise]" -s -r compact > $R/tests-pointwise.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -E "unrolled vectors" $R/tests-pointwise.log | tail -2; tail -2 $R/tests-pointwise.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
