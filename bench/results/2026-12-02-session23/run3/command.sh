#!/usr/bin/env bash
# Session 23 call 3 (bundle HEAD): the dim-bound launch test (fixed layout)
# and the split tests again; sum(flat N) with more loads in flight per
# thread for 16-bit scalar loads (unroll 16) and more blocks; a second
# sample of session 22 call 7's kernel times after the flush for the small
# batches (exported variants in .device/kk3: evict 1 on held small rows).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 60 $K/bin/kiln_tests "a dynamic row longer than the row schedule counts*" "a row split across blocks reduces deterministically" > $R/tests-fixed.log 2>&1; echo "tests rc=$? $SECONDS s"
OUT=$R timeout 60 $K/bin/bench_reduction "sum(flat N)" > $R/bench-flat.log 2>&1; echo "bench rc=$? $SECONDS s"
for c in '{"unroll": 16}' '{"unroll": 16, "split": 1024}' '{"split": 1024}' '{"threads_per_row": 1024, "threads": 1024, "split": 256}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "sum(flat N)" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
export KILN_KERNELS=$PWD/.device/kk3
ROWS=512 ROUNDS=3 timeout 110 python3 .device/s22kt.py > $R/kt512.log 2>&1; echo "kt512 rc=$? $SECONDS s"
ROWS=64 ROUNDS=2 timeout 60 python3 .device/s22kt.py > $R/kt64.log 2>&1; echo "kt64 rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
