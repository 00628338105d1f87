#!/usr/bin/env bash
# session 8, device call 4: GPU tests of the changed row forms (prefetch, clusters with resident grids, staged rows after the copy refactor, grid tails)
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
run() { timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1; rc=$?; echo "rc=$rc $((SECONDS-S)) s: $2: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed" $OUT/t.txt | head -5 | tee -a $L; }
run 170 "held rows with the next row prefetched match the reference"
run 140 "rows split across a thread-block cluster match the reference"
run 120 "rows staged in shared memory by bulk copies match the reference"
run 30 "a row kernel's grid tail*"
timeout 20 ./kiln_runtime_tests "[gpu]" --reporter compact 2>&1 | tail -1 | tee -a $L
rm -f $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
