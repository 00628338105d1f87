#!/usr/bin/env bash
# session 10, device call 7: the heuristic with hinted loads carrying L1 priorities (f32 short rows loop,
# light f32 rows of 32768 loop at 1024 x 8); the reduction tests its forms reach; every reduction benchmark
# next to the anchors
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
t 60 "graphs split into several kernels match the reference"
t 200 "looped rows with L1/L2 eviction hints, and held rows read with evict_first, match the reference"
echo "tests done $((SECONDS-S)) s" | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=$((585 - SECONDS)) bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
