#!/usr/bin/env bash
# Session 16 run 1: A = main 0f8ff3c, B = wip/columns2 f9d7b13 (main + split + dedupe + columns + bench cases)
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
S=$SECONDS; L=$OUT/log.txt
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee -a $L
t() {  # variant, cap, test
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib timeout $2 ./kiln_tests "$3" --reporter compact > $OUT/t$1.txt 2>&1)
  echo "$1 test rc=$? $((SECONDS-S)) s [$3]: $(tail -c 300 $OUT/t$1.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error|skip" $OUT/t$1.txt | cut -c1-300 | head -12 | tee -a $L
}
t A 60 "softmax and log_softmax of wide logits*"
t B 200 "whole-tensor reductions and few long rows*"
t B 120 "column reductions, split or not, match the reference"
(cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout 60 ./bench_reduction "sum [" "sum(0) [" 2>&1) | grep -aE "kiln [0-9] kernel|check|error|FAIL" | sed 's/  */ /g' | tee -a $L
(cd /tmp/kA/kiln/bin && LD_LIBRARY_PATH=/tmp/kA/kiln/lib timeout 60 ./bench_reduction "sum [" 2>&1) | grep -aE "kiln [0-9] kernel|check|error|FAIL" | sed 's/  */ /g' | sed 's/^/A /' | tee -a $L
(cd /tmp/kB/kiln/anchors && timeout 150 python3 anchors_reduction.py "sum [32768" "sum(0) [32768" 2>&1) | grep -aE "sum(\(0\))? \[" | sed 's/  */ /g' | tee -a $L
t B 280 "[gpu]"
cp $OUT/tB.txt $OUT/tB-all.txt
echo "done $((SECONDS-S)) s" | tee -a $L
