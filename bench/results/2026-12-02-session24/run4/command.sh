#!/usr/bin/env bash
# Session 24 call 4 (bundle 99eeb1e, as call 3): configs for the dynamic
# softmax at N = 32768 (3.76-3.77 TB/s by the heuristic, rmsnorm 4.0) and
# rmsnorm at N = 16384 f32.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for c in '{"threads_per_row": 512, "threads": 512, "evict": 1, "unroll": 8}' '{"threads_per_row": 512, "threads": 512, "evict": 1, "unroll": 2}' '{"threads_per_row": 256, "threads": 256, "evict": 1}' '{"threads_per_row": 1024, "threads": 1024, "evict": 1, "unroll": 2}' '{"threads_per_row": 512, "threads": 512, "evict": 2}' '{"threads_per_row": 512, "threads": 512, "evict": 1}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "softmax(-1) (dynamic N) [4096x32768" "(dynamic N) [8192x16384 float32" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
grep -h "kiln [0-9] kernel\|^###" $R/bench-sweep.log | cut -c1-110
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
