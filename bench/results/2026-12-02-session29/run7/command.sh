#!/usr/bin/env bash
# Session 29 call 7: layernorm f32 1024x262144 rebuilt as 16 blocks of 256
# threads prefetching the next row beside resident w and b (the new
# heuristic) against the old rebuild (8 blocks of 512, an override), three
# rounds; then the GPU tests that run that kernel (composites at every row
# length, the rebuilt kernels from unaligned pointers, constant rows,
# several outputs, prefetched rows).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
B=$K/bin/bench_reduction
sweep() { env KILN_ROW_CONFIG="$2" KILN_CACHE_DIR=/tmp/cache-s timeout 90 $B "$1" > sw.log 2>&1; echo "${2:-heuristic} :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-100)"; cat sw.log >> "$R/sweeps.log"; }
cd "$R"
for round in 1 2 3; do
  echo "=== round $round ($SECONDS s)"
  sweep "layernorm [1024x262144 float32]" ""
  sweep "layernorm [1024x262144 float32]" '{"cluster": 8, "min_blocks": 0}'
done
echo "=== tests ($SECONDS s)"
timeout 240 $K/bin/kiln_tests "the op library's row-wise composites match the reference at every row length,kernels rebuilt after a spill stay correct from unaligned base pointers,a constant row has variance zero and normalizes to the bias,several outputs of one row reduction: statistics*,held rows with the next row prefetched match the reference" > "$R/tests.log" 2>&1; echo "rc=$?"
tail -3 "$R/tests.log"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
