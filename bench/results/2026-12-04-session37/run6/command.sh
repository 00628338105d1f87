#!/usr/bin/env bash
# Session 37 call 6 (bundle of the commit it prints, 667a72f): this host's
# raw launch cost (floor.cu), then every [gpu] test, the lessons (1, 2, 4-7),
# kiln_interop_tests and tests/torch, one process per test case.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
(cd $K/anchors && timeout 60 nvcc -arch=sm_90 -O2 floor.cu -o floor -lcuda -lnvrtc && timeout 60 ./floor) > $R/floor.log 2>&1
grep -h "host_us\|per_node" $R/floor.log
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=$((560 - SECONDS)) KILN_DEADLINE_S=$((570 - SECONDS)) bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed\|timed out\|passed\|PASS\|FAIL\|graph replay\|CUDA graph\|^ok" $R/t/run.log | head -60
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
