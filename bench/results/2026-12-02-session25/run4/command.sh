#!/usr/bin/env bash
# Session 25 call 4 (bundle d4cd1d9): one-step rows in an entry of their
# own. Every dynamic benchmark case twice; layernorm bf16 N = 4096 at
# min_blocks 7 (the static kernel's 7 blocks per SM); the dynamic-length,
# variant and facade [gpu] tests.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
for round in 1 2; do
timeout 100 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn$round.log 2>&1; echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-dyn$round.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-90
done
for mb in 7 6; do
KILN_ROW_CONFIG="{\"min_blocks\": $mb}" timeout 30 $K/bin/bench_reduction "layernorm (dynamic N) [32768x4096 bfloat16" > $R/ln-mb$mb.log 2>&1
grep -h "kiln [0-9] kernel\|FAIL" $R/ln-mb$mb.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //; s/^/mb'$mb' /' | cut -c1-90
done
timeout 300 $K/bin/kiln_tests "rows of a dynamic length match the reference in the vectorized and the scalar entry,long dynamic rows launch a variant built once for them" > $R/tests-dyn.log 2>&1; echo "tests rc=$? $SECONDS s"
tail -3 $R/tests-dyn.log
grep -B3 -A12 "FAILED" $R/tests-dyn.log | head -50
timeout 60 $K/bin/kiln_facade_tests "[gpu]" > $R/facade.log 2>&1; echo "facade rc=$? $SECONDS s"; tail -2 $R/facade.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
