#!/usr/bin/env bash
# Session 16, device call 4 (main): whole-tensor sums without the plain row loop; the GPU tests call 3 had no time for.
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib
S=$SECONDS; L=$OUT/log.txt; END=235
echo "commit $(cat $K/COMMIT)" | tee $L
for rep in 1 2; do (cd $K/bin && timeout 30 ./bench_reduction "sum [" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L; done
left() { echo $((END - (SECONDS-S))); }
t() {
  local cap=$1; local l=$(left); [ $l -lt $cap ] && cap=$l; [ $cap -lt 5 ] && { echo "SKIP (no time) [$2]" | tee -a $L; return; }
  (cd $K/bin && timeout $cap ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -5 | tee -a $L
}
t 30 "whole-tensor reductions and few long rows*"
t 30 "column reductions (split into parts or not) match the reference"
t 20 "a constant row has variance zero and normalizes to the bias"
t 20 "several outputs of one row reduction*"
t 20 "elementwise producers and consumers fused around the reduction match the reference"
t 20 "reduction kernels stay correct from unaligned base pointers"
t 20 "staged configs stay correct from unaligned base pointers"
t 20 "graphs split into several kernels match the reference"
t 40 "tuning: softmax and gelu*"
t 200 "rows looped by the blocks that fit at once*"
echo "done $((SECONDS-S)) s" | tee -a $L
