#!/usr/bin/env bash
# Session 24 call 5 (bundle 99eeb1e, as call 3): f32 dynamic rows in the
# 512-thread range at unroll 8 against 4 (call 4: softmax 32768 f32 3.99 vs
# 3.72), two rounds each.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for round in 1 2; do
for c in '{"threads_per_row": 512, "threads": 512, "evict": 1, "unroll": 8}' '{"threads_per_row": 512, "threads": 512, "evict": 1, "unroll": 4}'; do
  echo "### round $round KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "(dynamic N) [4096x32768 float32" "(dynamic N) [8192x16384 float32" "(dynamic N) [1024x262144" >> $R/bench-sweep.log 2>&1
done; done; echo "sweep $SECONDS s"
grep -h "kiln [0-9] kernel\|^###\|registers" $R/bench-sweep.log | cut -c1-110
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
