#!/usr/bin/env bash
# session 8, device call 10: the looped form with L2 eviction hints (config "evict"): test, then next to the heuristic and the plain loop
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 40 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
W="[4096x32768 bfloat16]"
bench heuristic "" "$W" "rmsnorm [4096x32768 float32]"
for t in 256 512; do for u in 2 4; do
  for e in 0 1; do bench "loop-$t-$u-evict$e" "{\"persistent\": 0, \"threads_per_row\": $t, \"unroll\": $u, \"evict\": $e}" "$W"; done
done; done
bench evict-f32 '{"persistent": 0, "threads_per_row": 512, "unroll": 2, "evict": 1}' "rmsnorm [4096x32768 float32]" "softmax(-1) [1024x262144"
bench noevict-f32 '{"persistent": 0, "threads_per_row": 512, "unroll": 2}' "rmsnorm [4096x32768 float32]" "softmax(-1) [1024x262144"
bench heuristic-again "" "$W"
echo "bench $((SECONDS-S)) s" | tee -a $L
timeout 120 ./kiln_tests "looped rows with L2 eviction hints match the reference" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed" $OUT/t.txt | head -5 | tee -a $L
rm -f $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
