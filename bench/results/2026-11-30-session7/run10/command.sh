#!/usr/bin/env bash
# session 7, device call 10: the grid tail (cross_entropy's mean in one kernel) and straight-line pointwise kernels: tests, then numbers
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
run() { timeout $1 ./kiln_tests "$2" --reporter compact 2>&1 | tail -3 > $OUT/t.txt; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s: $2: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; }
run 60 "[gpu][pointwise]"
run 40 "a row kernel's grid tail*"
run 60 "cross_entropy matches the reference per row and averaged*"
run 30 "cross_entropy's mean over 4096 rows of 32768*"
run 30 "graphs split into several kernels match the reference"
run 60 "rows split across a thread-block cluster match the reference"
timeout 30 ./bench_reduction cross_entropy 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | tee -a $L
mkdir -p $OUT/kv
KILN_EXPORT_KERNELS=$OUT/kv timeout 40 ./bench_pointwise variants > $OUT/bv.txt 2>&1; echo "variants bench $((SECONDS-S)) s" | tee -a $L
(cd $K/anchors && KILN_KERNELS=$OUT/kv timeout 70 python3 anchors_pointwise.py variants) 2>&1 | grep -E "TB/s" | tee -a $L
rm -rf $OUT/kv $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
