#!/usr/bin/env bash
# session 7, device call 7: the [gpu] tests call 6 did not reach (its 360 s cap), the runtime's [gpu] tests, the lessons
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
for t in "rows staged in shared memory by bulk copies match the reference" "a constant row has variance zero and normalizes to the bias" \
  "several outputs of one row reduction: statistics, normalized rows and saved statistics" \
  "elementwise producers and consumers fused around the reduction match the reference" \
  "reduction kernels stay correct from unaligned base pointers" "staged configs stay correct from unaligned base pointers" \
  "graphs split into several kernels match the reference" \
  "tuning: softmax and gelu(x + b) at two shapes each, never slower than the heuristic; a second process compiles and benchmarks nothing"; do
  timeout 150 ./kiln_tests "$t" --reporter compact 2>&1 | tail -3 > $OUT/t.txt; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s: $t: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L
done
timeout 60 ./kiln_runtime_tests "[gpu]" --reporter compact 2>&1 | tail -2 | tee -a $L
for l in lesson_01_bias_gelu lesson_02_row_reductions lesson_04_linear; do timeout 60 ./$l > $OUT/$l.txt 2>&1; echo "$l rc=$? $((SECONDS-S)) s" | tee -a $L; tail -3 $OUT/$l.txt | tee -a $L; done
rm -f $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
