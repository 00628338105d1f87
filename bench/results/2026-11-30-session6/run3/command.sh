#!/usr/bin/env bash
# session 6, device call 3: row clusters (push exchange, one exchange per level): tests, bench, sweep, ncu
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
echo "commit $(cat $K/COMMIT)"
echo "== bench (heuristic) long rows"
timeout 120 ./bench_reduction 262144 4096x32768 2>&1 > $OUT/bench-long.log; echo "rc=$? $((SECONDS-S)) s"; grep -E 'TB/s' $OUT/bench-long.log
for c in '{"persistent": 1, "threads_per_row": 512, "cluster": 2}' '{"persistent": 1, "threads_per_row": 256, "cluster": 4}'; do
  echo "== sweep $c"
  KILN_ROW_CONFIG="$c" timeout 60 ./bench_reduction 4096x32768 2>&1 | grep -E 'TB/s|FAIL|rror' | tail -8
done 2>&1 | tee $OUT/sweep.log
echo "== ncu softmax 262144 $((SECONDS-S)) s"
timeout 120 ncu --clock-control none -k regex:kiln_row --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis ./bench_reduction "softmax(-1) [1024x262144" > $OUT/ncu-softmax262k.log 2>&1; echo "rc=$?"
grep -E 'Duration|Throughput|Stall|Warp Cycles|Achieved|Theoretical|Block Limit|Cluster|Registers' $OUT/ncu-softmax262k.log | head -40
echo "== tests [gpu][reduction] $((SECONDS-S)) s"
timeout 200 ./kiln_tests "[gpu][reduction]" --reporter compact 2>&1 | tail -40 > $OUT/tests-reduction.log; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s"; tail -4 $OUT/tests-reduction.log
echo "done $((SECONDS-S)) s"
