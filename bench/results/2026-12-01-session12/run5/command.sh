#!/usr/bin/env bash
# session 12, device call 5 (final): GPU tests of the exp and sum changes; every pointwise and reduction benchmark
# next to the anchors; the prefetch test
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -10 | tee -a $L
}
t 60 "every reduction op along the last axis matches the reference at every row length"
t 60 "the op library's row-wise composites match the reference at every row length"
t 40 "softmax of rows holding -inf stays finite*"
t 40 "*propagate NaN like PyTorch*"
t 60 "looped rows with L1 and L2 eviction hints and held rows read with evict_first match the reference"
t 60 "every op and dtype matches the reference on the GPU"
echo "tests done $((SECONDS-S)) s" | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=$((470 - SECONDS)) bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -aE "kiln 1 kernel|kiln 2 kernel|torch.compile|kiln \(do_bench\)|eager|triton|Triton|launch|floor" $OUT/pipeline.txt | sed 's/  */ /g' | head -150 > $OUT/summary.txt
left=$((560 - SECONDS))
[ $left -gt 60 ] && t $left "held rows with the next row prefetched match the reference"
echo "done $((SECONDS-S)) s" | tee -a $L
