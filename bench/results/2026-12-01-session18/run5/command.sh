#!/usr/bin/env bash
# Session 18 call 5: argmax/argmin without an axis (in the arg-split GPU
# test), the lanes test and the multi-kernel graphs test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
timeout 200 "$K/bin/kiln_tests" "argmax and argmin split into parts give the first index of the extreme" --durations yes > tests-arg.log 2>&1 & 
timeout 200 "$K/bin/kiln_tests" "column reductions whose threads own several adjacent rows (lanes) match the reference" > tests-lanes.log 2>&1 &
timeout 200 "$K/bin/kiln_tests" "graphs split into several kernels match the reference" > tests-multi.log 2>&1 &
wait
for f in tests-*.log; do echo "--- $f"; tail -n 3 $f; done
cd "$OUT" && tar czf r.tgz r && rm -rf r
