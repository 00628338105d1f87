#!/usr/bin/env bash
# Session 16, device call 3 (main: split + dedupe + columns + row-shaped reshaped inputs): every pointwise and
# reduction benchmark next to the anchors; whole-sum row_loop A/B; then GPU tests with the rest of the call.
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt; END=560
echo "commit $(cat $K/COMMIT)" | tee $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=300 bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -aE "kiln [0-9] kernel|torch.compile|kiln \(do_bench\)|eager|triton|Triton|launch|floor" $OUT/pipeline.txt | sed 's/  */ /g' | head -200 > $OUT/summary.txt
bench() {
  echo "== CFG=$KILN_ROW_CONFIG" | tee -a $L
  (cd $K/bin && timeout 30 ./bench_reduction "$@" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
for rep in 1 2; do for cfg in '{}' '{"row_loop":0}'; do KILN_ROW_CONFIG="$cfg" bench "sum [32768x4096 bfloat16]"; done; done
echo "t=$((SECONDS-S))" | tee -a $L
left() { echo $((END - (SECONDS-S))); }
(cd $K/bin && timeout 30 ./kiln_runtime_tests "[gpu]" --reporter compact > $OUT/rt.txt 2>&1); echo "runtime [gpu] rc=$? $((SECONDS-S)) s: $(tail -c 200 $OUT/rt.txt | tail -1)" | tee -a $L
cap=$(left)
(cd $K/bin && timeout $cap ./kiln_tests "[gpu]" "~rows split across a thread-block cluster*" "~held rows with the next row prefetched*" "~rows staged in shared memory by bulk copies*" --reporter compact --durations yes > $OUT/t.txt 2>&1)
echo "kiln_tests [gpu] (but 3 run in call 2) rc=$? $((SECONDS-S)) s: $(grep -a "test case" $OUT/t.txt | tail -1)" | tee -a $L
grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -8 | tee -a $L
grep -a " s: " $OUT/t.txt | awk -F' s: ' '{a[$2]+=$1} END {for (k in a) printf "%8.1f %s\n", a[k], k}' | sort -rn | head -50 > $OUT/durations.txt
echo "done $((SECONDS-S)) s" | tee -a $L
