#!/usr/bin/env bash
# Session 23 call 6 (bundle HEAD): the three test cases call 5 failed (a
# build of the scalar entry alone planned another geometry), and the
# dynamic-length softmax/rmsnorm under a few configs (data for the dynamic
# heuristic, which stays as it is this session).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
T="rows of a dynamic length match the reference*,rows split across blocks*,a row split across blocks reduces deterministically,a dynamic row longer than the row schedule counts*"
timeout 150 $K/bin/kiln_tests "$T" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
for c in '{"threads_per_row": 128, "threads": 128, "evict": 1}' '{"threads_per_row": 256, "threads": 256, "evict": 1}' '{"threads_per_row": 128, "threads": 128}' '{"vector": 1}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "dynamic N" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
