#!/usr/bin/env bash
# session 7, device call 9: after dropping the pinned weight loads: the 32768x4096 rows and the small batches, kiln and anchors in one call
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
mkdir -p $OUT/kr
KILN_EXPORT_KERNELS=$OUT/kr OUT=$OUT timeout 120 ./bench_reduction "[32768x4096" "[1x4096" "[64x4096" "[512x4096" > $OUT/bench-reduction.log 2>&1; echo "bench rc=$? $((SECONDS-S)) s" | tee -a $L
grep -E "kiln [0-9] kernel|FAIL|us per call" $OUT/bench-reduction.log | tee -a $L
(cd $K/anchors && KILN_KERNELS=$OUT/kr OUT=$OUT timeout 200 python3 anchors_reduction.py "[32768x4096" "[1x4096" "[64x4096" "[512x4096") > $OUT/anchors-reduction.log 2>&1; echo "anchors rc=$? $((SECONDS-S)) s" | tee -a $L
grep -v "back to back" $OUT/anchors-reduction.log | grep -E "us " | tee -a $L
rm -rf $OUT/kr
echo "done $((SECONDS-S)) s" | tee -a $L
