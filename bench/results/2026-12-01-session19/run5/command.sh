#!/usr/bin/env bash
# Session 19 call 5 (the final kernels): kiln-tune of log_softmax 1024x262144
# (its heuristic spills at clusters of 16 and is rebuilt: the tuner's
# heuristic candidate is now that rebuild), var/std in parts and the 262144
# rows again, then every [gpu] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for gname in lsm var0f var0b stdall; do
  KILN_CACHE=0 timeout 60 "$K/bin/kiln-tune" tune .device/$gname.graph --verbose --iters 20 -o $R/tune-$gname.json > $R/tune-$gname.log 2>&1; echo "$gname rc=$?"
  grep -E "tuned now|bug" $R/tune-$gname.log | head -2
done
timeout 60 "$K/bin/bench_reduction" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "layernorm [1024x262144" 2>&1 | tee "$R/rows262144.log" | grep -i "kiln .*kernel\|error\|FAIL"
echo "== tests $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=330 KILN_DEADLINE_S=340 bash scripts/gpu-run.sh $R/t > $R/gpu-run.log 2>&1; echo "gpu-run rc=$?"
sed -n 4,7p $R/t/run.log; grep -h "FAILED (exit\|timed out\|FAILED:" $R/t/tests-gpu.log $R/t/tests-runtime-gpu.log | head
grep -h "test cases" $R/t/*.log | tail -5
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
