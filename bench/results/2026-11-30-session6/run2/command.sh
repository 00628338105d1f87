#!/usr/bin/env bash
# session 6, device call 2: row clusters: [gpu][reduction] tests, bench at long rows, cluster config sweep
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
echo "commit $(cat $K/COMMIT)"
echo "== tests [gpu][reduction]"
timeout 280 ./kiln_tests "[gpu][reduction]" --reporter compact 2>&1 | tail -40 > $OUT/tests-reduction.log; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s"; tail -4 $OUT/tests-reduction.log
echo "== bench (heuristic) long rows"
timeout 120 ./bench_reduction 262144 4096x32768 2>&1 > $OUT/bench-long.log; echo "rc=$? $((SECONDS-S)) s"; grep -v '^JSON\|^  |' $OUT/bench-long.log | tail -16
for c in '{"persistent": 1, "threads_per_row": 512, "cluster": 2}' '{"persistent": 1, "threads_per_row": 256, "cluster": 2}' '{"persistent": 1, "threads_per_row": 256, "cluster": 4}' '{"persistent": 1, "threads_per_row": 128, "cluster": 8}'; do
  [ $((SECONDS-S)) -gt 480 ] && break
  echo "== sweep $c"
  KILN_ROW_CONFIG="$c" timeout 60 ./bench_reduction 4096x32768 2>&1 | grep -v '^JSON\|^  |' | grep -E 'TB/s|FAIL|rror' | tail -8
done 2>&1 | tee $OUT/sweep.log
echo "done $((SECONDS-S)) s"
