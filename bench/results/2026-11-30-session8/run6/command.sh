#!/usr/bin/env bash
# session 8, device call 6: the grid tail with one fence per block: tests, cross_entropy's time
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
run() { timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1; rc=$?; echo "rc=$rc $((SECONDS-S)) s: $2: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed" $OUT/t.txt | head -5 | tee -a $L; }
for i in 1 2; do timeout 30 ./bench_reduction cross_entropy 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | sed 's/  */ /g' | tee -a $L; done
run 30 "a row kernel's grid tail*"
run 60 "cross_entropy matches the reference per row and averaged*"
run 30 "cross_entropy's mean over 4096 rows of 32768*"
run 150 "rows split across a thread-block cluster match the reference"
rm -f $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
