#!/usr/bin/env bash
# session 11, device call 6: cluster barriers arrive relaxed except the pushing warp: 262144 benchmarks, ncu stalls of
# rmsnorm 262144, the cluster GPU test and the -inf / NaN tests
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
}
bench() {
  echo "== KILN_ROW_CONFIG='$1' ${@:2}" | tee -a $L
  (cd $K/bin && KILN_ROW_CONFIG="$1" timeout 100 ./bench_reduction "${@:2}" 2>&1) | grep -E "TB/s|error" | tee -a $L
}
bench "" 262144 "cross_entropy"
M='regex:smsp__average_warps_issue_stalled_(membar|barrier|long_scoreboard|lg_throttle)_per_issue_active\.ratio|smsp__issue_active\.avg\.pct_of_peak_sustained_active|dram__throughput\.avg\.pct_of_peak_sustained_elapsed|gpu__time_duration\.sum$'
(cd $K/bin && timeout 60 ncu --clock-control none -k regex:kiln_row --launch-skip 5 --launch-count 1 --metrics "$M" ./bench_reduction "rmsnorm [1024x262144" > $OUT/ncu-rmsnorm262k.log 2>&1)
grep -E 'stalled|issue_active|dram__|gpu__time' $OUT/ncu-rmsnorm262k.log | sed 's/  */ /g' | grep -v "peak_sustained\|per_" | tee -a $L
t 250 "rows split across a thread-block cluster match the reference"
t 60 "softmax of rows holding -inf stays finite*"
t 60 "*propagate NaN like PyTorch*"
t 40 "argmax and argmin return the first index among tied extremes"
echo "done $((SECONDS-S)) s" | tee -a $L
