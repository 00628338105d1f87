#!/usr/bin/env bash
# Session 39 call 1 (bundle of the commit it prints: 290598a's kernels plus
# an experiment knob): (a) the gradients' benchmark next to its anchors at
# the GPU-unverified refactor; (b) the fused norm gradients with the L2
# fetching the part's rows ahead (l2_prefetch 1, 2, 4) against the plain
# prefetch form: are they waiting on their next row's copy?; (c) ncu of the
# rmsnorm f32 gradient's fused kernel, plain and l2=2; (d) the [gpu] tests
# that 290598a's fixes touch (split graphs, gradients).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader
KILN_CACHE_DIR=$(mktemp -d) OUT=$R timeout 100 $K/bin/bench_backward > $R/bench-backward.log 2>&1; echo "bench rc=$?"; grep -h "TB/s\|FAIL" $R/bench-backward.log
(cd $K/anchors && OUT=$R timeout 80 python3 anchors_backward.py) > $R/anchors-backward.log 2>&1; echo "anchors rc=$?"; grep -v Warning $R/anchors-backward.log | grep "us"
echo "== bench done $SECONDS s"
for v in l2=1 l2=2 l2=4 none; do
  echo "-- $v"
  KILN_EXP_COLPART=$v KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/bench_backward "norm_backward [32768x4096" > $R/exp-$v.log 2>&1; echo "rc=$?"
  grep -h "TB/s\|FAIL" $R/exp-$v.log
done
echo "== sweep done $SECONDS s"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum
for v in none l2=2; do
  KILN_EXP_COLPART=$v KILN_CACHE_DIR=$(mktemp -d) timeout 100 ncu --clock-control none -k regex:kiln_row0 --launch-skip 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics $M $K/bin/bench_backward "rmsnorm_backward [32768x4096 float32]" > "$R/ncu-$v.log" 2>&1
  echo "== ncu $v rc=$? $SECONDS s"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles Per Issued|No Eligible|Dynamic Shared|Block Limit|dram__bytes|lookup" "$R/ncu-$v.log" | head -30
done
left=$((540 - SECONDS))
KILN_CACHE_DIR=$(mktemp -d) timeout $left $K/bin/kiln_tests "graphs split into several kernels match the reference","[gpu][grad]" > $R/tests.log 2>&1; echo "tests rc=$?"
tail -5 $R/tests.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
