#!/usr/bin/env bash
# session 9, device call 5: pointwise config nc 0 (plain ld.global, Triton's loads) next to torch.compile
# (variant rounds), every pointwise benchmark and the launch floor; the benchmark-graph test with nc 0
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
(cd $K/bin && timeout 60 ./kiln_tests "the benchmark graphs match the reference at the benchmark row lengths" --reporter compact > $OUT/t.txt 2>&1)
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="pointwise" KILN_ANCHORS="pointwise" KILN_VARIANTS=1 \
  KILN_DEADLINE_S=420 bash .device/gpu-run.sh /tmp/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
tar -C /tmp -czf $OUT/r.tgz r
