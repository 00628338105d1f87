#!/usr/bin/env bash
# Session 33 call 3: ncu on the static held softmax f32 4096x32768 (4.16
# TB/s) against the dynamic held one at the same config (3.67): where does
# the held dynamic row lose?
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
C1='{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 16, "unroll": 4, "evict": 1, "l2_prefetch": 48}'
prof() { local name=$1 cfg=$2 case=$3
  env ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$name timeout 150 ncu --clock-control none -k regex:kiln_row0 --launch-skip 5 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    $K/bin/bench_reduction "$case" > "$R/ncu-$name.log" 2>&1
  echo "== $name rc=$? $SECONDS s"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|L2 Hit|L1/TEX Hit|Executed Ipc|Waves" "$R/ncu-$name.log" | head -40
}
prof static "" "softmax(-1) [4096x32768 float32]"
prof held "$C1" "softmax(-1) (dynamic N) [4096x32768 float32]"
ls -la $R
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
