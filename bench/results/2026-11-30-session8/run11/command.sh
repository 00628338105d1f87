#!/usr/bin/env bash
# session 8, device call 11: the heuristic with L2 eviction hints (sums; rmsnorm bf16 4096x32768 looped) next to the anchors; the evict test
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
timeout 60 ./kiln_tests "looped rows with L2 eviction hints match the reference" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed" $OUT/t.txt | head -5 | tee -a $L
timeout 60 ./kiln_tests "the op library's row-wise composites match the reference at every row length" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L
timeout 60 ./kiln_tests "every reduction op along the last axis matches the reference at every row length" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L
timeout 30 ./kiln_tests "row-wise composites at 4096 x 32768*" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L
C='sum(-1)'; R='rmsnorm [4096x32768 bfloat16]'
echo "== no hints (evict 0)" | tee -a $L
KILN_ROW_CONFIG='{"evict": 0}' timeout 40 ./bench_reduction "$C" "$R" 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | sed 's/  */ /g' | tee -a $L
mkdir -p $OUT/kr
echo "== heuristic" | tee -a $L
KILN_EXPORT_KERNELS=$OUT/kr timeout 40 ./bench_reduction "$C" "$R" 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | sed 's/  */ /g' | tee -a $L
(cd $K/anchors && KILN_KERNELS=$OUT/kr timeout 120 python3 anchors_reduction.py "$C" "$R") 2>&1 | grep -E "TB/s" | grep -v "back to back" | sed 's/  */ /g' | tee -a $L
rm -rf $OUT/kr $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
