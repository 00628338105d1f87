#!/usr/bin/env bash
# Session 18 call 7 (9128197): normalizations over axis 0 as statistics in
# parts (kiln-tune's whole-graph times of the heuristic, as in call 6), the
# column sums again, then every [gpu] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for gname in smc lnc; do
  KILN_CACHE=0 timeout 100 "$K/bin/kiln-tune" tune .device/$gname.graph --verbose --iters 20 -o $R/tune-$gname.json > $R/tune-$gname.log 2>&1; echo "$gname rc=$?"
  grep -E "tuned now|<- chosen|candidates$" $R/tune-$gname.log | head -12
done
for cs in "sum(0) [32768x4096" "sum(r*x,0) [32768x4096"; do timeout 60 "$K/bin/bench_reduction" "$cs" 2>&1 | grep -E "kiln .*kernel|FAIL|rror"; done | tee $R/columns.log
echo "== tests $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=330 KILN_DEADLINE_S=340 bash scripts/gpu-run.sh $R/t > $R/gpu-run.log 2>&1; echo "gpu-run rc=$?"
sed -n 4,7p $R/t/run.log; grep -h "FAILED (exit\|timed out" $R/t/tests-gpu.log $R/t/tests-runtime-gpu.log | head
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
