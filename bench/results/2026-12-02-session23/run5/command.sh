#!/usr/bin/env bash
# Session 23 call 5 (bundle HEAD): dynamic row lengths read in vectors
# (vectorized entry where N is a multiple of the width), split rows at
# min_blocks 3: the GPU tests of both entries, the split rows, the dim
# bound; sum(flat N) and softmax/rmsnorm with a dynamic N beside the static
# kernels of the same cases; a few split configs.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
T="rows of a dynamic length match the reference*,rows split across blocks*,a dynamic row longer than the row schedule counts*,a row split across blocks reduces deterministically,every reduction op along the last axis*,reduction kernels stay correct from unaligned base pointers,whole-tensor reductions and few long rows*"
timeout 200 $K/bin/kiln_tests "$T" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
OUT=$R timeout 120 $K/bin/bench_reduction "sum(flat N)" "dynamic N" "softmax(-1) [32768x4096" "rmsnorm [32768x4096" "sum [32768x4096" > $R/bench.log 2>&1; echo "bench rc=$? $SECONDS s"
for c in '{"split": 512}' '{"min_blocks": 0}' '{"split": 512, "min_blocks": 0}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "sum(flat N)" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
