#!/usr/bin/env bash
# Session 15, call 2. A = main (effbe84), B = this session's commit: exps of a shared max by one fma
# (ex2(x*log2e - m*log2e)) in the online log-sum-exp and held exps; cross_entropy's heuristic takes plain row
# loops (grid tail); cluster row loops alternate two sets of tree slots (no barrier). A/B then B's GPU tests.
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt; END=570
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
abench() {  # variant, cases...
  echo "== $1 CFG=$KILN_ROW_CONFIG NOFLUSH=$KILN_BENCH_NOFLUSH" | tee -a $L
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib timeout 60 ./bench_reduction "${@:2}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
CASES=("[1024x262144" "cross_entropy" "softmax(-1) [32768x4096" "softmax(-1) [4096x32768" "log_softmax")
for i in 1 2; do abench A "${CASES[@]}"; abench B "${CASES[@]}"; done
for v in A B; do KILN_BENCH_NOFLUSH=1 abench $v "cross_entropy"; done
echo "t=$((SECONDS-S))" | tee -a $L
K=/tmp/kB/kiln; export LD_LIBRARY_PATH=$K/lib
left() { echo $((END - (SECONDS-S))); }
t() {
  local cap=$1; local l=$(left); [ $l -lt $cap ] && cap=$l; [ $cap -lt 5 ] && { echo "SKIP (no time) [$2]" | tee -a $L; return; }
  (cd $K/bin && timeout $cap ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -5 | tee -a $L
}
t 40 "cross_entropy matches the reference per row and averaged*"
t 40 "a row kernel's grid tail*"
t 40 "cross_entropy's mean over 4096 rows*"
t 40 "softmax of rows holding -inf*"
t 40 "softmax and log_softmax of wide logits*"
t 40 "every reduction op along the last axis matches the reference at every row length"
t 40 "the op library's row-wise composites match the reference at every row length"
t 40 "row-wise composites at 4096 x 32768*"
t 240 "rows split across a thread-block cluster match the reference"
t 120 "rows looped by the blocks that fit at once*"
echo "done $((SECONDS-S)) s" | tee -a $L
