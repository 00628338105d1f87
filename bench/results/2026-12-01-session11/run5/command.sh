#!/usr/bin/env bash
# session 11, device call 5: ncu warp-stall breakdown of held cluster rows (softmax, rmsnorm 1024x262144) and a
# held one-block-per-SM row (softmax f32 4096x32768), heuristic configs
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|smsp__issue_active\.avg\.pct_of_peak_sustained_active|dram__throughput\.avg\.pct_of_peak_sustained_elapsed|gpu__time_duration\.sum|smsp__warps_eligible\.avg\.per_cycle_active|sm__cycles_active\.avg|smsp__inst_executed\.sum|dram__bytes_read\.sum|dram__bytes_write\.sum'
nc() {  # label, case
  (cd $K/bin && timeout 100 ncu --clock-control none -k regex:kiln_row --launch-skip 5 --launch-count 1 --metrics "$M" ./bench_reduction "$2" > $OUT/ncu-$1.log 2>&1)
  echo "== ncu $1 rc=$? $((SECONDS-S)) s" | tee -a $L
  grep -E 'stalled|issue_active|dram__|gpu__time|eligible|cycles_active|inst_executed' $OUT/ncu-$1.log | sed 's/  */ /g' | awk '$NF+0 > 0.05 || /dram|gpu__time|inst|cycles/' | tee -a $L
}
nc softmax262k "softmax(-1) [1024x262144"
nc rmsnorm262k "rmsnorm [1024x262144"
nc softmaxf32-32k "softmax(-1) [4096x32768 float32"
echo "done $((SECONDS-S)) s" | tee -a $L
