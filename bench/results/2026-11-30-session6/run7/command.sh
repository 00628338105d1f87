#!/usr/bin/env bash
# session 6, device call 7: cross-entropy gather + one rescale per step: tests and bench
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
echo "commit $(cat $K/COMMIT)"
timeout 60 ./bench_reduction cross_entropy "softmax(-1) [4096x32768" 2>&1 > $OUT/bench.log; echo "rc=$? $((SECONDS-S)) s"; grep -E 'TB/s' $OUT/bench.log
timeout 200 ./kiln_tests "[gpu][reduction]" --reporter compact 2>&1 | tail -30 > $OUT/tests-reduction.log; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s"; tail -4 $OUT/tests-reduction.log
echo "done $((SECONDS-S)) s"
