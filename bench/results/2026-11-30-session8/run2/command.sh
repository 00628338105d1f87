#!/usr/bin/env bash
# session 8, device call 2: why prefetch measured slower (ncu, heuristic vs prefetch), the prefetch test's failure, cross_entropy's tail
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
prof() {  # name, config, case
  KILN_ROW_CONFIG="$2" timeout 60 ncu --clock-control none -k regex:kiln_row --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --section MemoryWorkloadAnalysis ./bench_reduction "$3" > $OUT/ncu-$1.log 2>&1
  echo "== ncu $1 rc=$? $((SECONDS-S)) s" | tee -a $L
  grep -E 'Duration|Memory Throughput|DRAM Throughput|Stall|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occ|Block Limit|Registers Per|Issue Slots Busy|No Eligible|Eligible Warps|Active Warps Per|L2 Hit|Grid Size|Waves' $OUT/ncu-$1.log | sed 's/  */ /g' | tee -a $L
}
prof softmax-bf16-default "" "softmax(-1) [32768x4096 bfloat16]"
prof softmax-bf16-prefetch '{"prefetch": 1}' "softmax(-1) [32768x4096 bfloat16]"
prof rmsnorm-f32-default "" "rmsnorm [32768x4096 float32]"
prof rmsnorm-f32-prefetch '{"prefetch": 1}' "rmsnorm [32768x4096 float32]"
timeout 30 ./bench_reduction cross_entropy 2>&1 | grep -E "kiln [0-9] kernel|FAIL" | sed 's/  */ /g' | tee -a $L
timeout 200 ./kiln_tests "held rows with the next row prefetched match the reference" --reporter compact > $OUT/t.txt 2>&1
echo "prefetch test rc=$? $((SECONDS-S)) s" | tee -a $L
grep -iE "failed|passed" $OUT/t.txt | head -20 | tee -a $L
tar -C $OUT -czf $OUT/ncu.tgz $(cd $OUT && ls ncu-*.log) t.txt && rm -f $OUT/ncu-*.log $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
