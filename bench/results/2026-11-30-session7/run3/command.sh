#!/usr/bin/env bash
# session 7, device call 3: [gpu][reduction] (staged two-pass variance, pinned weights), staged heuristic bench, small batches via do_bench
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
timeout 300 ./kiln_tests "[gpu][reduction]" --reporter compact 2>&1 | tail -30 > $OUT/tests.txt; echo "tests rc=${PIPESTATUS[0]} $((SECONDS-S)) s" | tee -a $L; tail -3 $OUT/tests.txt | tee -a $L
timeout 60 ./bench_reduction "[4096x32768 bfloat16]" > $OUT/b1.txt 2>&1; echo "heuristic rc=$? $((SECONDS-S)) s" | tee -a $L; grep -E "kiln [0-9] kernel|FAIL" $OUT/b1.txt | tee -a $L
KILN_ROW_CONFIG='{"persistent": 0, "stage": 1, "threads_per_row": 256, "unroll": 2}' timeout 60 ./bench_reduction "layernorm [4096x32768 bfloat16]" "softmax(-1) [4096x32768 bfloat16]" > $OUT/b2.txt 2>&1; echo "stage 256 rc=$? $((SECONDS-S)) s" | tee -a $L; grep -E "kiln [0-9] kernel|FAIL" $OUT/b2.txt | tee -a $L
mkdir -p $OUT/kr
KILN_EXPORT_KERNELS=$OUT/kr timeout 60 ./bench_reduction "[1x4096" "[64x4096" "[512x4096" > $OUT/b3.txt 2>&1; echo "bench small rc=$? $((SECONDS-S)) s" | tee -a $L
grep -E "us per call" $OUT/b3.txt | tee -a $L
(cd $K/anchors && KILN_KERNELS=$OUT/kr timeout 150 python3 anchors_reduction.py "[1x4096" "[64x4096" "[512x4096") > $OUT/a.txt 2>&1; echo "anchors small rc=$? $((SECONDS-S)) s" | tee -a $L
grep -v "back to back" $OUT/a.txt | grep -E "us " | tee -a $L
rm -rf $OUT/kr $OUT/*.jsonl $OUT/*.json
echo "done $((SECONDS-S)) s" | tee -a $L
