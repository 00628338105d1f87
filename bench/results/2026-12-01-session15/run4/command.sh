#!/usr/bin/env bash
# Session 15, call 4. A = main 1217a48, B = wip/balanced 2cfc58c (resident grids balanced: as few blocks as give the
# same rounds). 1) Is the last partial round of held 4096x32768 rows a cost? A at 3960 (264 x 15), 4096, 4224
# (264 x 16) rows: if t(4224) ~ t(4096), the half-idle last round costs ~ (4224-4096)/4096 of the time.
# 2) B: plain row loops (balanced: 256 blocks x 16 rows) vs default on 4096x32768. 3) cross_entropy A/B. 4) tests.
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt; END=395
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
abench() {  # variant, cases...
  echo "== $1 CFG=$KILN_ROW_CONFIG ROWS=$KILN_BENCH_ROWS" | tee -a $L
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib timeout 60 ./bench_reduction "${@:2}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
H=("softmax(-1) [4096x32768 b" "layernorm [4096x32768 b")
for i in 1 2; do
  KILN_BENCH_ROWS=4096:3960 abench A "softmax(-1) [3960x32768 b" "layernorm [3960x32768 b"
  abench A "${H[@]}"
  KILN_BENCH_ROWS=4096:4224 abench A "softmax(-1) [4224x32768 b" "layernorm [4224x32768 b"
done
echo "t=$((SECONDS-S))" | tee -a $L
R=("softmax(-1) [4096x32768" "layernorm [4096x32768" "rmsnorm [4096x32768 b")
for i in 1 2; do
  abench B "${R[@]}"
  KILN_ROW_CONFIG='{"row_loop":1}' abench B "${R[@]}"
done
for i in 1 2; do abench A "cross_entropy [8192x32768"; abench B "cross_entropy [8192x32768"; done
echo "t=$((SECONDS-S))" | tee -a $L
K=/tmp/kB/kiln; export LD_LIBRARY_PATH=$K/lib
left() { echo $((END - (SECONDS-S))); }
t() {
  local cap=$1; local l=$(left); [ $l -lt $cap ] && cap=$l; [ $cap -lt 5 ] && { echo "SKIP (no time) [$2]" | tee -a $L; return; }
  (cd $K/bin && timeout $cap ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -5 | tee -a $L
}
t 30 "a row kernel's grid tail*"
t 30 "cross_entropy matches the reference per row and averaged*"
t 120 "rows looped by the blocks that fit at once*"
t 200 "rows split across a thread-block cluster match the reference"
echo "done $((SECONDS-S)) s" | tee -a $L
