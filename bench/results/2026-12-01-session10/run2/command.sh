#!/usr/bin/env bash
# session 10, device call 2: the heuristic with held packed bf16 rows (min_blocks 2) at 4096x32768;
# the reduction tests its forms reach; a sweep of single-pass sums (threads x unroll x evict);
# looped rmsnorm f32; every reduction benchmark next to the anchors
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
}
t 60 "every reduction op along the last axis matches the reference at every row length"
t 60 "the op library's row-wise composites match the reference at every row length"
t 60 "row-wise composites at 4096 x 32768 in bf16 match the reference on sampled rows"
t 30 "*propagate NaN like PyTorch*"
t 30 "softmax of rows holding -inf*"
t 30 "a constant row has variance zero and normalizes to the bias"
t 30 "several outputs of one row reduction*"
t 30 "elementwise producers and consumers fused around the reduction match the reference"
t 30 "reduction kernels stay correct from unaligned base pointers"
t 60 "held rows with the next row prefetched match the reference"
t 60 "graphs split into several kernels match the reference"
t 60 "staged configs stay correct from unaligned base pointers"
t 60 "cross_entropy*"
echo "tests done $((SECONDS-S)) s" | tee -a $L
cd $K/bin
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
C1="sum(-1) [32768x4096 bfloat16]"; C2="sum(-1) [4096x32768 bfloat16]"; C3="sum(-1) [32768x4096 float32]"; C4="cross_entropy [8192x32768 bfloat16]"
bench default "" "$C1" "$C2" "$C3" "$C4"
for e in 0 1; do for t in 64 128 256 512; do for u in 1 2 4 8; do
  bench "t$t u$u e$e" "{\"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u, \"evict\": $e}" "$C1" "$C2" "$C3" "$C4"
done; done; done
bench default-again "" "$C1" "$C2" "$C3" "$C4"
R1="rmsnorm [32768x4096 float32]"; R2="layernorm [32768x4096 float32]"
P='"persistent": 0, "prefetch": 0, "stage": 0, "evict": 1'
bench default "" "$R1" "$R2"
for c in "128 1" "128 2" "256 1" "256 2" "512 1"; do set -- $c
  bench "loop t$1 u$2 evict" "{$P, \"threads_per_row\": $1, \"threads\": $1, \"unroll\": $2}" "$R1" "$R2"
done
echo "bench done $((SECONDS-S)) s" | tee -a $L
cd $R
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=$((585 - SECONDS)) bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
