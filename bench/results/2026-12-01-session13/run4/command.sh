#!/usr/bin/env bash
# Session 13, device call 4 (final, main ac513be): every pointwise and reduction benchmark next to the anchors;
# then the matmul config-space GPU test with the rest of the call.
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=400 bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -aE "kiln 1 kernel|kiln 2 kernel|torch.compile|kiln \(do_bench\)|eager|triton|Triton|launch|floor" $OUT/pipeline.txt | sed 's/  */ /g' | head -150 > $OUT/summary.txt
left=$((565 - (SECONDS-S)))
(cd $K/bin && timeout $left ./kiln_tests "matmul: every config of the Hopper kernel's space matches the reference" -r compact -s > $OUT/t.txt 2>&1)
echo "matmul config test rc=$? after $((SECONDS-S)) s (cap $left s): $(grep -ac ' passed' $OUT/t.txt) passed, $(grep -ac ' failed' $OUT/t.txt) failed; $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L
echo "done $((SECONDS-S)) s" | tee -a $L
