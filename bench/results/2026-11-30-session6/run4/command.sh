#!/usr/bin/env bash
# session 6, device call 4: row clusters looping over rows: bench, row_loop 0 vs 1, ncu, tests
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
echo "commit $(cat $K/COMMIT)"
echo "== bench (heuristic) 262144"
timeout 100 ./bench_reduction 262144 2>&1 > $OUT/bench-long.log; echo "rc=$? $((SECONDS-S)) s"; grep -E 'TB/s|clusters' $OUT/bench-long.log
echo "== row_loop 0"
KILN_ROW_CONFIG='{"row_loop": 0}' timeout 60 ./bench_reduction "1024x262144" 2>&1 | grep -E 'TB/s|FAIL|rror' | tail -8
echo "== ncu softmax 262144 $((SECONDS-S)) s"
timeout 150 ncu --clock-control none -k regex:kiln_row --launch-skip 3 --launch-count 1 --set full ./bench_reduction "softmax(-1) [1024x262144" > $OUT/ncu-softmax262k.log 2>&1; echo "rc=$?"
grep -E 'Duration|Memory Throughput|Stall|Warp Cycles|Achieved Occ|Max Active Clusters|Registers|L2 Hit|Issue Slots Busy|No Eligible' $OUT/ncu-softmax262k.log | head -30
echo "== tests [gpu][reduction] $((SECONDS-S)) s"
timeout 220 ./kiln_tests "[gpu][reduction]" --reporter compact 2>&1 | tail -40 > $OUT/tests-reduction.log; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s"; tail -4 $OUT/tests-reduction.log
echo "done $((SECONDS-S)) s"
