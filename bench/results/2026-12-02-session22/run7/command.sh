#!/usr/bin/env bash
# Session 22 call 7: kernel times after the L2 flush (profiler) of the small-row
# variants exported in calls 2 and 4 (merged in .device/kk3) beside torch.compile and Triton.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
export KILN_KERNELS=$PWD/.device/kk3
ROWS=512 ROUNDS=3 timeout 110 python3 .device/s22kt.py > $R/kt512.log 2>&1; echo "kt512 rc=$? $SECONDS s"
ROWS=64 ROUNDS=2 timeout 60 python3 .device/s22kt.py > $R/kt64.log 2>&1; echo "kt64 rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
