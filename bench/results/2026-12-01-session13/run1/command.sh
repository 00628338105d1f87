#!/usr/bin/env bash
# Session 13, device call 1. A = ee84460 (main's kernels), B = wip/welford-static-counts (88deb9e, on e50e49a).
# A/B of layernorm 1024x262144 (Welford trees of equal counts); fixed cost per call: row-count slopes and
# no-flush timings; sum bf16 32768x4096 narrow-row configs; B's GPU tests (reduction ops, composites,
# constant row, wide logits).
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a $L
bench() {  # variant, cases...
  echo "== $1 ROWS=$KILN_BENCH_ROWS NOFLUSH=$KILN_BENCH_NOFLUSH CFG=$KILN_ROW_CONFIG" | tee -a $L
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib timeout 90 ./bench_reduction "${@:2}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
for i in 1 2; do bench A "layernorm [1024x262144" ; bench B "layernorm [1024x262144"; done
bench B "layernorm [32768x4096"
# Fixed cost per call: the same kernels at 1x, 2x, 4x the rows, and without the flush.
bench B "sum(-1) [32768x4096 bf" "softmax(-1) [4096x32768 bf" "cross_entropy [8192x32768" "sum(-1) [32768x4096 f"
KILN_BENCH_ROWS=32768:65536,4096:8192,8192:16384 bench B "sum(-1) [65536x4096 bf" "softmax(-1) [8192x32768 bf" "cross_entropy [16384x32768" "sum(-1) [65536x4096 f"
KILN_BENCH_ROWS=32768:131072,4096:16384,8192:32768 bench B "sum(-1) [131072x4096 bf" "softmax(-1) [16384x32768 bf" "cross_entropy [32768x32768" "sum(-1) [131072x4096 f"
KILN_BENCH_NOFLUSH=1 bench B "sum(-1) [32768x4096 bf" "softmax(-1) [4096x32768 bf" "cross_entropy [8192x32768" "sum(-1) [32768x4096 f" "layernorm [4096x32768" "sum(-1) [4096x32768 bf"
# Narrow blocks for bf16 sums of 4096 (warp or two per row, whole row per step).
for cfg in '{"threads_per_row":32,"threads":32,"unroll":16,"vector":8,"persistent":0,"evict":1}' \
           '{"threads_per_row":64,"threads":64,"unroll":8,"vector":8,"persistent":0,"evict":1}' \
           '{"threads_per_row":128,"threads":128,"unroll":4,"vector":8,"persistent":0,"evict":1}'; do
  KILN_ROW_CONFIG="$cfg" bench B "sum(-1) [32768x4096 bf"
done
K=/tmp/kB/kiln; export LD_LIBRARY_PATH=$K/lib
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -10 | tee -a $L
}
t 60 "softmax and log_softmax of wide logits*"
t 60 "every reduction op along the last axis matches the reference at every row length"
t 60 "the op library's row-wise composites match the reference at every row length"
t 40 "a constant row has variance zero and normalizes to the bias"
echo "done $((SECONDS-S)) s" | tee -a $L
