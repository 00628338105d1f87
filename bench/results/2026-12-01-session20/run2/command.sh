#!/usr/bin/env bash
# Session 20 call 2: the new unaligned-pointer test of kernels rebuilt after
# a spill (layernorm / log_softmax f32 262144), then every [gpu] test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 120 $K/bin/kiln_tests "kernels rebuilt after a spill*" > $R/unaligned.log 2>&1; echo "unaligned rc=$?"; tail -3 $R/unaligned.log
echo "== tests $SECONDS s"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=400 KILN_DEADLINE_S=420 bash scripts/gpu-run.sh $R/t > $R/gpu-run.log 2>&1; echo "gpu-run rc=$?"
sed -n 4,7p $R/t/run.log; grep -h "FAILED (exit\|timed out\|FAILED:" $R/t/tests-gpu.log $R/t/tests-runtime-gpu.log | head
grep -h "test cases" $R/t/*.log | tail -5
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
