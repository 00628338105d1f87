#!/usr/bin/env bash
# session 10, device call 9: sums of light 16-bit rows of 32768 at 512 threads x 8 vectors with evict_first;
# the reduction op test (streamed rows); sums next to the anchors
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
(cd $K/bin && timeout 40 ./kiln_tests "every reduction op along the last axis matches the reference at every row length" --reporter compact > $OUT/t.txt 2>&1)
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_REDUCTION_CASES="sum(-1)" \
  KILN_ANCHOR_CASES="sum(-1)" KILN_PACK=1 KILN_DEADLINE_S=150 bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -E "kiln 1 kernel|torch.compile|kiln \(do_bench\)|eager" $OUT/pipeline.txt | sed 's/  */ /g' | tee -a $L
