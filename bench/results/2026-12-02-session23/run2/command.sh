#!/usr/bin/env bash
# Session 23 call 2 (bundle 91e69f2): split rows (config split). A whole
# tensor as one dynamic dim (sum(flat N), 32768x4096 values) by the
# heuristic, beside the static whole sum (the planner's parts) and the
# anchors' x.sum(); split 1 (one block per row, as before) and other split
# configs; then every [gpu] test (session 22's fixes and the split tests).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
OUT=$R timeout 90 $K/bin/bench_reduction "sum(flat N)" "sum [32768x4096" > $R/bench-sum.log 2>&1; echo "bench rc=$? $SECONDS s"
for c in '{"split": 1}' '{"split": 256}' '{"split": 1024}' '{"threads_per_row": 256, "threads": 256, "split": 512}' '{"unroll": 4}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "sum(flat N)" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
(cd $K/anchors && OUT=$R timeout 120 python3 anchors_reduction.py "sum [32768x4096") > $R/anchors-sum.log 2>&1; echo "anchors rc=$? $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=400 KILN_DEADLINE_S=420 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
