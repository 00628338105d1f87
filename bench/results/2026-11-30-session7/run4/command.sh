#!/usr/bin/env bash
# session 7, device call 4: config sweeps for sum and rmsnorm bf16 4096x32768 (behind torch.compile), small-batch graph replay
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
sweep() {  # case, configs...
  local c=$1; shift
  for C in "$@"; do
    r=$(KILN_ROW_CONFIG="$C" timeout 30 ./bench_reduction "$c" 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | sed 's/  */ /g')
    echo "$C | $r" | tee -a $L
  done
}
echo "== default" | tee -a $L
timeout 30 ./bench_reduction "sum(-1) [4096x32768 bfloat16]" "rmsnorm [4096x32768 bfloat16]" 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | tee -a $L
sweep "sum(-1) [4096x32768 bfloat16]" \
  '{"persistent": 0, "threads_per_row": 128, "unroll": 8}' '{"persistent": 0, "threads_per_row": 256, "unroll": 2}' \
  '{"persistent": 0, "threads_per_row": 256, "unroll": 4}' '{"persistent": 0, "threads_per_row": 512, "unroll": 2}' \
  '{"persistent": 0, "threads_per_row": 512, "unroll": 4}' '{"persistent": 0, "threads_per_row": 64, "unroll": 8}' \
  '{"persistent": 0, "threads_per_row": 1024, "unroll": 2}'
sweep "rmsnorm [4096x32768 bfloat16]" \
  '{"persistent": 0, "threads_per_row": 256, "unroll": 4}' '{"persistent": 0, "threads_per_row": 512, "unroll": 2}' \
  '{"persistent": 0, "threads_per_row": 512, "unroll": 4}' '{"persistent": 0, "threads_per_row": 1024, "unroll": 2}' \
  '{"persistent": 1, "threads_per_row": 256, "cluster": 2, "row_loop": 1}' '{"persistent": 1, "threads_per_row": 512, "cluster": 2, "row_loop": 1}' \
  '{"persistent": 1, "threads_per_row": 512, "cluster": 2, "row_loop": 0}' '{"persistent": 1, "threads_per_row": 1024}'
echo "sweeps $((SECONDS-S)) s" | tee -a $L
mkdir -p $OUT/kr
KILN_EXPORT_KERNELS=$OUT/kr timeout 60 ./bench_reduction "[1x4096" "[64x4096" "[512x4096" > $OUT/b3.txt 2>&1; echo "bench small rc=$? $((SECONDS-S)) s" | tee -a $L
(cd $K/anchors && KILN_KERNELS=$OUT/kr timeout 150 python3 anchors_reduction.py "[1x4096" "[64x4096" "[512x4096") > $OUT/a.txt 2>&1; echo "anchors small rc=$? $((SECONDS-S)) s" | tee -a $L
grep -E "graph replay|do_bench|torch.compile  " $OUT/a.txt | grep -v "back to back" | tee -a $L
rm -rf $OUT/kr $OUT/*.jsonl $OUT/*.json
echo "done $((SECONDS-S)) s" | tee -a $L
