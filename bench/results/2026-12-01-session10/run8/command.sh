#!/usr/bin/env bash
# session 10, device call 8 (final): the evict GPU test (both load forms, 1024 x 8, held evict_first);
# every pointwise and reduction benchmark next to the anchors at the final heuristic
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
}
t 150 "looped rows with L1 and L2 eviction hints and held rows read with evict_first match the reference"
t 30 "the op library's row-wise composites match the reference at every row length"
echo "tests done $((SECONDS-S)) s" | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_PACK=1 \
  KILN_DEADLINE_S=$((570 - SECONDS)) bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
