#!/usr/bin/env bash
# Session 19 call 6: the pointwise broadcast test (its mask's inputs on a
# grid now) five times; kiln-tune of log_softmax 1024x262144 with the
# assembler's logs (KILN_DUMP=cubin-log) to see which resource report the
# heuristic's rebuilds saw.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for i in 1 2 3 4 5; do ( cd $R && timeout 100 "$K/bin/kiln_tests" "row, column and scalar broadcasts*" > tests-bcast-$i.log 2>&1; echo "bcast $i rc=$?"; tail -n 2 tests-bcast-$i.log ) & done; wait
KILN_DUMP=cubin-log KILN_CACHE=0 timeout 60 "$K/bin/kiln-tune" tune .device/lsm.graph --verbose --iters 10 -o $R/tune-lsm.json > $R/tune-lsm.log 2> $R/tune-lsm.err; echo "lsm rc=$?"
grep -E "tuned now|bug" $R/tune-lsm.log | head -2; grep -E "ok |pruned" $R/tune-lsm.log | head -4
KILN_DUMP=cubin-log KILN_CACHE=0 "$K/bin/kiln" compile .device/lsm.graph --json > $R/lsm.json 2> $R/lsm-compile.err; echo "compile rc=$?"; head -c 600 $R/lsm.json
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
