#!/usr/bin/env bash
# Session 19 call 7: the pointwise broadcast test (its mask's inputs on a grid now) five times.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for i in 1 2 3 4 5; do ( cd $R && timeout 100 "$K/bin/kiln_tests" "*scalar broadcasts*[gpu]" > tests-bcast-$i.log 2>&1; echo "bcast $i rc=$?"; tail -n 2 tests-bcast-$i.log ) & done; wait
cd "$OUT" && tar czf r.tgz r && rm -rf r
