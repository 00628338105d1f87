#!/usr/bin/env bash
# session 7, device call 8: the two [gpu] tests whose names call 7's filter split (commas)
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
timeout 100 ./kiln_tests "several outputs of one row reduction*" --reporter compact 2>&1 | tail -2 | tee -a $L; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s" | tee -a $L
timeout 200 ./kiln_tests "tuning: softmax and gelu*" --reporter compact 2>&1 | tail -4 | tee -a $L; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s" | tee -a $L
