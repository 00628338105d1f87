#!/usr/bin/env bash
# Session 39 call 4 (bundle of the commit it prints): short column sums
# split further (about 512 threads per SM, parts of at least 32 values):
# the norm gradients (their second kernel sums 512 parts of 4096 columns),
# three short column sums against their session-18 split (KILN_ROW_CONFIG,
# the old heuristic's config), then the [gpu] tests of column and split
# reductions and of the norm gradients.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
KILN_CACHE_DIR=$(mktemp -d) timeout 50 $K/bin/bench_backward "norm_backward [32768x4096" > $R/bench-backward.log 2>&1; echo "rc=$?"; grep -h "TB/s\|FAIL" $R/bench-backward.log
old='{"persistent": 0, "threads": 128, "threads_per_row": 1, "unroll": 16, "vector": 1, "min_blocks": 6, "split": '
for c in "512x4096:2" "1024x1024:2" "8192x1024:16"; do
  shape=${c%%:*}; s=${c##*:}
  KILN_CACHE_DIR=$(mktemp -d) timeout 25 $K/bin/bench_reduction "sum(0) [$shape" > $R/new-$shape.log 2>&1; echo "new rc=$?"; grep -h "TB/s\|FAIL" $R/new-$shape.log
  KILN_ROW_CONFIG="$old$s}" KILN_CACHE_DIR=$(mktemp -d) timeout 25 $K/bin/bench_reduction "sum(0) [$shape" > $R/old-$shape.log 2>&1; echo "old (split $s) rc=$?"; grep -h "TB/s\|FAIL" $R/old-$shape.log
done
echo "== bench done $SECONDS s"
KILN_CACHE_DIR=$(mktemp -d) timeout 100 $K/bin/kiln_tests -f .device/s39d-tests.txt > $R/tests.log 2>&1; echo "tests rc=$?"; tail -4 $R/tests.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
