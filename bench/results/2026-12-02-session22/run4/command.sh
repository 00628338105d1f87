#!/usr/bin/env bash
# Session 22 call 4: held small rows (rmsnorm, softmax bf16 at 512/64/1 x 4096)
# with evict_first row loads (evict 1: ld.global.nc, evict 2: coherent) against
# the heuristic's plain loads, under flushed do_bench beside torch.compile and Triton.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KK=$R/kk; mkdir -p $KK
for c in "" '{"evict":1}' '{"evict":2}'; do
  KILN_ROW_CONFIG="$c" KILN_EXPORT_KERNELS=$KK timeout 60 $K/bin/bench_reduction "rmsnorm [512x4096" "softmax(-1) [512x4096" "rmsnorm [64x4096" "softmax(-1) [64x4096" "rmsnorm [1x4096" "softmax(-1) [1x4096" >> $R/bench-small.log 2>&1
done
echo "exports done $SECONDS s"
export KILN_KERNELS=$KK TRITON_CACHE_DIR=$R/tcache
ROWS=512 ROUNDS=7 timeout 150 python3 .device/s22inv.py > $R/inv.log 2>&1; echo "inv rc=$? $SECONDS s"
ROWS=64 ROUNDS=5 timeout 100 python3 .device/s22inv.py > $R/inv64.log 2>&1; echo "inv64 rc=$? $SECONDS s"
ROWS=1 ROUNDS=5 timeout 100 python3 .device/s22inv.py > $R/inv1.log 2>&1; echo "inv1 rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
