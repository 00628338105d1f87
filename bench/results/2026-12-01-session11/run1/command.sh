#!/usr/bin/env bash
# session 11, device call 1: held cluster rows reuse softmax's exps; weights in shared memory (resident).
# GPU tests of the cluster paths; 262144 benchmarks (heuristic, resident 0) next to the anchors
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
}
bench() {
  echo "== KILN_ROW_CONFIG='$1' ${@:2}" | tee -a $L
  (cd $K/bin && KILN_ROW_CONFIG="$1" timeout 100 ./bench_reduction "${@:2}" 2>&1) | grep -E "TB/s|error" | tee -a $L
}
bench "" 262144
bench '{"persistent": 1, "threads_per_row": 512, "cluster": 8, "row_loop": 1, "resident": 0}' "rmsnorm [1024x262144" "layernorm [1024x262144"
bench '{"persistent": 1, "threads_per_row": 512, "cluster": 8, "row_loop": 1, "resident": 1}' "layernorm [1024x262144"
bench '{"persistent": 1, "threads_per_row": 512, "cluster": 8, "row_loop": 0}' "layernorm [1024x262144"
t 150 "rows split across a thread-block cluster match the reference"
t 60 "softmax of rows holding -inf stays finite*"
t 60 "*propagate NaN like PyTorch*"
t 40 "every reduction op along the last axis matches the reference at every row length"
t 30 "the op library's row-wise composites match the reference at every row length"
echo "tests done $((SECONDS-S)) s" | tee -a $L
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_REDUCTION_CASES="262144" \
  KILN_ANCHOR_CASES="262144" KILN_PACK=1 KILN_DEADLINE_S=$((570 - SECONDS)) bash scripts/gpu-run.sh $OUT/r > $OUT/pipeline.txt 2>&1
echo "pipeline rc=$? $((SECONDS-S)) s" | tee -a $L
grep -E "kiln 1 kernel|torch.compile|kiln \(do_bench\)|eager" $OUT/pipeline.txt | sed 's/  */ /g' | tee -a $L
