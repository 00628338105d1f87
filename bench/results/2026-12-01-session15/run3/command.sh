#!/usr/bin/env bash
# Session 15, device call 3 (final, main): every pointwise and reduction benchmark next to the anchors (launch host
# cost with them); a cross_entropy 8192x32768 config sweep; then GPU tests with the rest of the call.
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt; END=545
echo "commit $(cat $K/COMMIT)" | tee $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=330 bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -aE "kiln 1 kernel|kiln 2 kernel|torch.compile|kiln \(do_bench\)|eager|triton|Triton|launch|floor" $OUT/pipeline.txt | sed 's/  */ /g' | head -150 > $OUT/summary.txt
bench() {
  echo "== CFG=$KILN_ROW_CONFIG NOFLUSH=$KILN_BENCH_NOFLUSH" | tee -a $L
  (cd $K/bin && timeout 30 ./bench_reduction "$@" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
C="cross_entropy [8192x32768"
for cfg in '{}' '{"unroll":2}' '{"unroll":8}' '{"threads_per_row":256,"threads":256}' '{"min_blocks":12}' '{"row_loop":0}'; do
  [ $((END - (SECONDS-S))) -lt 200 ] && break
  KILN_ROW_CONFIG="$cfg" bench "$C"
done
echo "t=$((SECONDS-S))" | tee -a $L
left() { echo $((END - (SECONDS-S))); }
t() {
  local cap=$1; local l=$(left); [ $l -lt $cap ] && cap=$l; [ $cap -lt 5 ] && { echo "SKIP (no time) [$2]" | tee -a $L; return; }
  (cd $K/bin && timeout $cap ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -5 | tee -a $L
}
(cd $K/bin && timeout 30 ./kiln_runtime_tests "[gpu]" --reporter compact > $OUT/rt.txt 2>&1); echo "runtime [gpu] rc=$? $((SECONDS-S)) s: $(tail -c 200 $OUT/rt.txt | tail -1)" | tee -a $L
t 40 "looped rows with L1 and L2 eviction hints*"
t 20 "elementwise producers and consumers fused around the reduction match the reference"
t 20 "graphs split into several kernels match the reference"
t 20 "argmax and argmin return the first index among tied extremes"
t 20 "a constant row has variance zero and normalizes to the bias"
t 20 "reduction kernels stay correct from unaligned base pointers"
t 30 "the benchmark graphs match the reference at the benchmark row lengths"
t 200 "every op and dtype matches the reference on the GPU"
echo "done $((SECONDS-S)) s" | tee -a $L
