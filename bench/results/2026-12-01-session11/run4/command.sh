#!/usr/bin/env bash
# session 11, device call 4 (final): tuning, runtime and matmul GPU tests; every reduction benchmark next to the anchors
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./$3 "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$3 $2]: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
}
t 100 "[gpu][tuning]" kiln_tests
t 60 "[gpu]" kiln_runtime_tests
t 90 "[gpu][matmul]" kiln_tests
echo "tests done $((SECONDS-S)) s" | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=$((560 - SECONDS)) bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -E "kiln 1 kernel|kiln 2 kernel|torch.compile|kiln \(do_bench\)|eager|triton|Triton" $OUT/pipeline.txt | sed 's/  */ /g' | tee -a $L
