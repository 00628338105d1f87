#!/usr/bin/env bash
# Session 15, call 1. A = main (effbe84), B = wip/s15 (main + one-buffer launch + plain row loops + a barrier closing
# every cluster row loop row). Launch host cost A/B twice; 262144 norms A/B twice; default vs row_loop 1 on B;
# then B's GPU tests: row_loop, grid tail, runtime [gpu], facade, -inf, reduction ops, eviction hints, fused.
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt; END=560
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a $L
for i in 1 2; do for v in A B; do
  echo "== launch $v" | tee -a $L
  (cd /tmp/k$v/kiln/bin && LD_LIBRARY_PATH=/tmp/k$v/kiln/lib timeout 25 ./bench_pointwise launch 2>&1) | grep -a "launch host cost:" | sed 's/  */ /g' | tee -a $L
done; done
echo "t=$((SECONDS-S))" | tee -a $L
abench() {  # variant, cases...
  echo "== $1 CFG=$KILN_ROW_CONFIG NOFLUSH=$KILN_BENCH_NOFLUSH" | tee -a $L
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib timeout 60 ./bench_reduction "${@:2}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
for i in 1 2; do abench A "[1024x262144"; abench B "[1024x262144"; done
echo "t=$((SECONDS-S))" | tee -a $L
CASES=("cross_entropy [8192x32768" "sum(-1) [32768x4096 f" "sum(-1) [32768x4096 bf" "softmax(-1) [32768x4096" "rmsnorm [32768x4096" "layernorm [32768x4096")
for i in 1 2; do
  abench B "${CASES[@]}"
  KILN_ROW_CONFIG='{"row_loop":1}' abench B "${CASES[@]}"
done
KILN_BENCH_NOFLUSH=1 abench B "cross_entropy [8192x32768"
KILN_ROW_CONFIG='{"row_loop":1}' KILN_BENCH_NOFLUSH=1 abench B "cross_entropy [8192x32768"
echo "t=$((SECONDS-S))" | tee -a $L
K=/tmp/kB/kiln; export LD_LIBRARY_PATH=$K/lib
left() { echo $((END - (SECONDS-S))); }
(cd $K/bin && timeout 40 ./kiln_runtime_tests "[gpu]" --reporter compact > $OUT/rt.txt 2>&1); echo "runtime [gpu] rc=$? $((SECONDS-S)) s: $(tail -c 200 $OUT/rt.txt | tail -1)" | tee -a $L
t() {
  local cap=$1; local l=$(left); [ $l -lt $cap ] && cap=$l; [ $cap -lt 5 ] && { echo "SKIP (no time) [$2]" | tee -a $L; return; }
  (cd $K/bin && timeout $cap ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -5 | tee -a $L
}
t 150 "rows looped by the blocks that fit at once*"
t 40 "a row kernel's grid tail*"
t 40 "every op and dtype matches the reference on the GPU"
t 40 "softmax of rows holding -inf*"
t 40 "every reduction op along the last axis matches the reference at every row length"
t 40 "the op library's row-wise composites match the reference at every row length"
t 60 "looped rows with L1 and L2 eviction hints*"
t 40 "elementwise producers and consumers fused around the reduction match the reference"
t 40 "row, column and scalar broadcasts, dynamic dims and several outputs"
t 40 "unaligned base pointers take the scalar entry and stay correct"
echo "done $((SECONDS-S)) s" | tee -a $L
