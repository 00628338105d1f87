#!/usr/bin/env bash
# session 11, device call 3: prefetch 2 (each thread's cp.async of its next row) against the heuristic:
# 1024x262144 clusters and 4096x32768 held rows; the prefetch GPU test (both modes)
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
bench "" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "softmax(-1) [4096x32768" "layernorm [4096x32768"
bench '{"persistent": 1, "threads_per_row": 512, "cluster": 8, "row_loop": 1, "prefetch": 2}' "softmax(-1) [1024x262144" "rmsnorm [1024x262144"
bench '{"persistent": 1, "threads_per_row": 512, "prefetch": 2, "min_blocks": 0}' "softmax(-1) [4096x32768" "layernorm [4096x32768"
bench '{"persistent": 1, "threads_per_row": 512, "prefetch": 2, "min_blocks": 0, "evict": 0}' "rmsnorm [4096x32768"
bench "" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "softmax(-1) [4096x32768" "layernorm [4096x32768"
t 300 "held rows with the next row prefetched match the reference"
echo "done $((SECONDS-S)) s" | tee -a $L
