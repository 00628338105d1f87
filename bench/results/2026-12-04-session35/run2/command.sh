#!/usr/bin/env bash
# Session 35 call 2: ncu on cross_entropy bf16 8192x32768 (3.84 TB/s
# flushed, 4.10 not) against 8192x128256 (4.36 / 4.44): what holds the
# rows of 32768 — MUFU (one ex2 a value), issue, or the rows' ends?
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
M=sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum
prof() { local name=$1 case=$2
  KILN_CACHE_DIR=/tmp/cache timeout 150 ncu --clock-control none -k regex:kiln_row0 --launch-skip 5 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --metrics $M $K/bin/bench_reduction "$case" > "$R/ncu-$name.log" 2>&1
  echo "== $name rc=$? $SECONDS s"
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Executed Ipc|Issue Slots|SM Busy|pipe|issue_active|per_second|dram__bytes|inst_executed.sum|Waves" "$R/ncu-$name.log" | head -40
}
prof ce32k "cross_entropy [8192x32768 bfloat16]"
prof ce128k "cross_entropy [8192x128256 bfloat16]"
prof sum32k "sum(-1) [4096x32768 bfloat16]"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
