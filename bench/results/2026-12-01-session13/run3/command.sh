#!/usr/bin/env bash
# Session 13, device call 3 (main ac513be): held rows of 32768 against one-step loops of 1024 threads;
# the matmul GPU tests; the prefetch GPU test with what is left of the call.
mkdir -p /tmp/kB && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kB -xf -
S=$SECONDS; L=$OUT/log.txt
echo "B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
bench() {  # cases...
  echo "== CFG=$KILN_ROW_CONFIG" | tee -a $L
  (cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout 90 ./bench_reduction "$@" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
H="softmax(-1) [4096x32768 bf"; LB="layernorm [4096x32768 bf"; LF="layernorm [4096x32768 f"
bench "$H" "$LB" "$LF"
for e in 1 2; do
  KILN_ROW_CONFIG='{"persistent":0,"threads_per_row":1024,"threads":1024,"unroll":4,"evict":'$e',"min_blocks":0}' bench "$H" "$LB"
  KILN_ROW_CONFIG='{"persistent":0,"threads_per_row":1024,"threads":1024,"unroll":8,"evict":'$e',"min_blocks":0}' bench "$LF"
done
bench "$H" "$LB" "$LF"
K=/tmp/kB/kiln; export LD_LIBRARY_PATH=$K/lib
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -10 | tee -a $L
}
t 120 "matmul matches the reference: dtypes*"
t 60 "matmul epilogues match the reference"
t 60 "matmul epilogues: every float op matches the reference"
t 60 "matmul: every config of the Hopper kernel's space matches the reference"
t 40 "matmul: clusters of 2*"
t 20 "matmul: a misaligned operand*"
left=$((560 - (SECONDS-S)))
(cd $K/bin && timeout $left stdbuf -oL ./kiln_tests "held rows with the next row prefetched match the reference" -r compact -s > $OUT/prefetch.txt 2>&1)
echo "prefetch test rc=$? after $((SECONDS-S)) s (cap $left s): $(grep -ac ' passed' $OUT/prefetch.txt) passed, $(grep -ac ' failed' $OUT/prefetch.txt) failed; $(tail -c 300 $OUT/prefetch.txt | tail -2 | tr '\n' ' ')" | tee -a $L
grep -a " failed" $OUT/prefetch.txt | head -5 | cut -c1-300 | tee -a $L
echo "done $((SECONDS-S)) s" | tee -a $L
