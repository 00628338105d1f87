#!/usr/bin/env bash
# Session 18 call 2 (b70149f): per-kernel durations (ncu, caches not
# flushed between kernels) of the column form's two kernels under lane /
# block / unroll configs; the lanes GPU test again (test fixed); the
# resource-report compile test on this machine.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
( cd $R && timeout 200 "$K/bin/kiln_tests" "column reductions whose threads own several adjacent rows (lanes) match the reference" > tests-lanes.log 2>&1; echo "lanes rc=$?"; tail -n 3 tests-lanes.log ) &
( cd $R && KILN_DUMP=cubin-log timeout 100 "$K/bin/kiln_tests" "every reduction op along the last axis*" > tests-resources.log 2>&1; echo "resources rc=$?"; tail -n 3 tests-resources.log ) &
wait
echo "== ncu $SECONDS s"
C='"persistent":0,"threads_per_row":1,"vector":1'
i=0
for cs in "sum(0) [32768x4096 bfloat16]" "sum(r*x,0) [32768x4096 bfloat16]" "sum(0) [32768x4096 float32]"; do
  for cfg in '' "{$C,\"threads\":128,\"unroll\":8,\"lanes\":4}" "{$C,\"threads\":128,\"unroll\":16,\"lanes\":4}" "{$C,\"threads\":128,\"unroll\":4,\"lanes\":4}" "{$C,\"threads\":128,\"unroll\":8,\"lanes\":8}" "{$C,\"threads\":128,\"unroll\":8,\"lanes\":1}" "{$C,\"threads\":32,\"unroll\":16,\"lanes\":4}" "{$C,\"threads\":64,\"unroll\":16,\"lanes\":2}" "{$C,\"threads\":32,\"unroll\":16,\"lanes\":1}"; do
    i=$((i+1))
    echo "$cs | ${cfg:-heuristic}" > "$R/ncu-$i.csv"
    KILN_ROW_CONFIG="$cfg" timeout 60 ncu --clock-control none --cache-control none -k regex:kiln_row --launch-skip 6 --launch-count 6 \
      --metrics gpu__time_duration.sum --csv --page raw "$K/bin/bench_reduction" "$cs" >> "$R/ncu-$i.csv" 2>&1
    echo "$i rc=$? $SECONDS s"
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
