#!/usr/bin/env bash
# Session 16 run 2: B = wip/columns2 + planner (permuted workspace reads) + prod tests on +-1 + unroll up to 16.
mkdir -p /tmp/kB && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kB -xf -
S=$SECONDS; L=$OUT/log.txt
echo "B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
t() {  # cap, test
  (cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout $1 ./kiln_tests "$2" --reporter compact --durations yes > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-400 | head -12 | tee -a $L
}
t 200 "whole-tensor reductions and few long rows*"
t 120 "column reductions (split into parts or not) match the reference"
b() {  # label, cases...
  local lab=$1; shift
  (cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout 60 ./bench_reduction "$@" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | sed "s/^/[$lab] /" | tee -a $L
}
for rep in 1 2; do
b default "sum(0) [" "sum ["
KILN_ROW_CONFIG='{"unroll": 16}' b u16 "sum(0) ["
KILN_ROW_CONFIG='{"unroll": 16, "threads": 256}' b u16t256 "sum(0) ["
KILN_ROW_CONFIG='{"unroll": 4}' b u4 "sum(0) ["
KILN_ROW_CONFIG='{"row_loop": 0}' b noloop "sum ["
KILN_ROW_CONFIG='{"row_loop": 0, "unroll": 8}' b noloop-u8 "sum ["
done
(cd /tmp/kB/kiln/anchors && timeout 150 python3 anchors_reduction.py "sum [32768" "sum(0) [32768" 2>&1) | grep -aE "sum(\(0\))? \[" | sed 's/  */ /g' | tee -a $L
t 330 "[gpu][reduction]"
cp $OUT/t.txt $OUT/t-reduction.txt
echo "done $((SECONDS-S)) s" | tee -a $L
