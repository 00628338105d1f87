#!/usr/bin/env bash
# Session 30 call 1: the [gpu] tests that run layernorm f32 1024x262144's
# rebuilt kernel (re-landed in ee176c3: clusters of 16 x 256 threads, the
# next row prefetched beside resident w and b): composites at every row
# length, rebuilt kernels from unaligned pointers, constant rows, several
# outputs, prefetched rows; then that case's benchmark, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
cd "$R"
echo "=== tests ($SECONDS s)"
timeout 330 $K/bin/kiln_tests "the op library's row-wise composites match the reference at every row length,kernels rebuilt after a spill stay correct from unaligned base pointers,a constant row has variance zero and normalizes to the bias,several outputs of one row reduction: statistics*,held rows with the next row prefetched match the reference" > "$R/tests.log" 2>&1; echo "rc=$?"
tail -3 "$R/tests.log"
for round in 1 2; do
  echo "=== bench round $round ($SECONDS s)"
  KILN_CACHE_DIR=/tmp/cache-s timeout 90 $K/bin/bench_reduction "layernorm [1024x262144 float32]" 2>&1 | tee -a "$R/bench.log" | grep -h 'kiln [0-9] kernel\|FAIL\|rror' | cut -c1-120
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
