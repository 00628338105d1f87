#!/usr/bin/env bash
# session 12, device call 6: the prefetch GPU test alone, its progress streamed (did it hang or run slow in call 5?)
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
(cd $K/bin && timeout 190 stdbuf -oL ./kiln_tests "held rows with the next row prefetched match the reference" -r compact -s > $OUT/t.txt 2>&1) &
for i in $(seq 1 19); do sleep 10; echo "$((SECONDS-S)) s: $(grep -c 'passed' $OUT/t.txt) passed; $(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader); $(tail -c 160 $OUT/t.txt | tr '\n' ' ' | tail -c 150)" | tee -a $L; done
wait
echo "done $((SECONDS-S)) s: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L
