#!/usr/bin/env bash
# Session 39 call 2 (bundle of the commit it prints): the column-partial
# heuristic with the L2 fetching rows ahead (bf16 norms 2 rows, f32 1),
# two rounds, against forms around it (3 rows ahead; 128 threads at three
# blocks per SM); ncu of the bf16 rmsnorm gradient's fused kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
for round in 1 2; do
for v in none l2=3 t=128,mb=3 l2=1; do
  echo "-- $v round $round"
  KILN_EXP_COLPART=$v KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/bench_backward "norm_backward [32768x4096" > $R/exp-$v-$round.log 2>&1; echo "rc=$?"
  grep -h "TB/s\|FAIL" $R/exp-$v-$round.log
done
done
echo "== sweep done $SECONDS s"
M=dram__bytes_read.sum,dram__bytes_write.sum
KILN_CACHE_DIR=$(mktemp -d) timeout 100 ncu --clock-control none -k regex:kiln_row0 --launch-skip 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics $M $K/bin/bench_backward "rmsnorm_backward [32768x4096 bfloat16]" > "$R/ncu-bf16.log" 2>&1
echo "== ncu rc=$? $SECONDS s"
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Dynamic Shared|dram__bytes|L2 Hit|scoreboard" "$R/ncu-bf16.log" | head -20
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
