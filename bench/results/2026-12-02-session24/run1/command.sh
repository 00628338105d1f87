#!/usr/bin/env bash
# Session 24 call 1 (bundle HEAD): dynamic row lengths of 32768 and 262144
# beside their static kernels, under the heuristic and a few configs; then
# every [gpu] test (session 23's last code had not run them all).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
timeout 80 $K/bin/bench_reduction "[4096x32768" "[1024x262144" > $R/bench-long.log 2>&1; echo "bench rc=$? $SECONDS s"
for c in '{"threads_per_row": 512, "threads": 512, "evict": 1}' '{"threads_per_row": 1024, "threads": 1024, "evict": 1}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 25 $K/bin/bench_reduction "(dynamic N) [4096x32768" "(dynamic N) [1024x262144" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=400 KILN_DEADLINE_S=405 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
