#!/usr/bin/env bash
# Session 30 call 2 (bundle fd7a906): the [gpu] tests of the two kernel
# changes since 60134b9 -- column reductions split across blocks in one
# kernel (every column test), and layernorm f32 1024x262144's rebuild
# (re-landed in ee176c3: the composites, rebuilt kernels from unaligned
# pointers, constant rows, several outputs, prefetched rows) -- then the
# column sums' benchmark under the heuristic and two variants.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
cd "$R"
echo "=== column tests ($SECONDS s)"
timeout 250 stdbuf -oL $K/bin/kiln_tests -d yes "column reductions*,a column sum split across blocks*,var and std split into parts match the reference,softmax and norms over a non-last axis match the reference,argmax and argmin split into parts give the first index of the extreme,split reductions of elementwise expressions match the reference,graphs split into several kernels match the reference" > "$R/tests-columns.log" 2>&1; echo "rc=$?"
grep -E "passed|failed|FAILED" "$R/tests-columns.log" | tail -5
echo "=== layernorm rebuild tests ($SECONDS s)"
timeout 250 stdbuf -oL $K/bin/kiln_tests -d yes "the op library's row-wise composites match the reference at every row length,kernels rebuilt after a spill stay correct from unaligned base pointers,a constant row has variance zero and normalizes to the bias,several outputs of one row reduction: statistics*,held rows with the next row prefetched match the reference" > "$R/tests-layernorm.log" 2>&1; echo "rc=$?"
grep -E "passed|failed|FAILED" "$R/tests-layernorm.log" | tail -5
B=$K/bin/bench_reduction
sweep() { env KILN_ROW_CONFIG="$2" KILN_CACHE_DIR=/tmp/cache-s timeout 60 $B "$1" > sw.log 2>&1; echo "${2:-heuristic} :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/(p95 .*) //' | cut -c1-120)"; cat sw.log >> "$R/sweeps.log"; }
echo "=== column sums ($SECONDS s)"
for c in "sum(0) [32768x4096 bfloat16]" "sum(0) [32768x4096 float32]" "sum(r*x,0) [32768x4096 bfloat16]"; do
  echo "-- $c"
  sweep "$c" ""
  sweep "$c" '{"min_blocks": 0}'
  sweep "$c" '{"split": 32}'
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
