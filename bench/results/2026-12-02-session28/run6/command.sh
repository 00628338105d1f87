#!/usr/bin/env bash
# Session 28 call 6: the tuner with held rows fetching ahead in its space
# (where the heuristic loops a row a block could hold): the [gpu][tuning]
# test (every candidate checked against the reference), then
# bench_reduction with KILN_BENCH_TUNE on the rows of call 5.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
(cd $R && timeout 200 $K/bin/kiln_tests "[gpu][tuning]" > "$R/tests-tuning.log" 2>&1; echo "kiln_tests [gpu][tuning] rc=$?")
tail -3 "$R/tests-tuning.log"
env KILN_BENCH_TUNE="$R/tune.json" KILN_CACHE_DIR=/tmp/cache-t timeout 240 $K/bin/bench_reduction \
  "softmax(-1) [32768x4096 float32]" "rmsnorm [32768x4096 float32]" "rmsnorm [32768x4096 bfloat16]" "softmax(-1) [32768x4096 bfloat16]" > "$R/bench-tune.log" 2>&1
echo "bench_reduction rc=$?"
grep -h "kiln 1 kernel\|tuned\|tuning:\|FAIL" "$R/bench-tune.log" | grep -v "^JSON" | cut -c1-230
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
