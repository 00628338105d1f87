#!/usr/bin/env bash
# session 11, device call 2: cluster rows at 1024 threads; layernorm with the weight resident and the bias loaded ahead;
# the cluster GPU test with a longer cap
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
bench '{"persistent": 1, "threads_per_row": 1024, "cluster": 8, "row_loop": 1}' "softmax(-1) [1024x262144" "rmsnorm [1024x262144"
bench '{"persistent": 1, "threads_per_row": 512, "cluster": 8, "row_loop": 1, "resident": 0}' "layernorm [1024x262144"
bench "" 262144
t 400 "rows split across a thread-block cluster match the reference"
cp $OUT/t.txt $OUT/t-cluster.txt
echo "done $((SECONDS-S)) s" | tee -a $L
