#!/usr/bin/env bash
# session 11, device call 8: the 1024x262144 rows at d556368 next to the anchors (one pipeline run)
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_REDUCTION_CASES="262144" \
  KILN_ANCHOR_CASES="262144" KILN_PACK=1 KILN_DEADLINE_S=100 bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -aE "kiln 1 kernel|torch.compile|kiln \(do_bench\)|eager" $OUT/pipeline.txt | sed 's/  */ /g' | tee -a $L
