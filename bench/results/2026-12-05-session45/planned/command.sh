#!/usr/bin/env bash
# Session 45 call 1: where the attention scores kernel's time goes.
# bench_matmul block parts (scores T dynamic / static, softmax, blocks),
# then the same with KILN_EXP_NO_INSIDE=1 (the dynamic-N kernel without its
# register path for inner tiles: is code size the 1.5 us gap?), then ncu
# --set full on the dynamic and static scores kernels (clocks not locked),
# and the SASS of both.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
echo "bundle $(cat $W/kiln/COMMIT)"
K=$W/kiln
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
for v in base noin base noin; do
  F=$R/bench-$v-$SECONDS.log
  if [ $v = noin ]; then export KILN_EXP_NO_INSIDE=1; else unset KILN_EXP_NO_INSIDE; fi
  KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 70 $K/bin/bench_matmul block > $F 2>&1; echo "bench $v rc=$?"; grep -v '^{' $F | grep -v mlp
done
unset KILN_EXP_NO_INSIDE
echo "== bench done $SECONDS s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for p in "dyn 20" "sta 56"; do
  set -- $p
  KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 200 $NCU --set full --clock-control none -k regex:kiln_matmul --launch-skip $2 --launch-count 1 -o $R/ncu-$1 $K/bin/bench_matmul block > $R/ncu-$1.log 2>&1; echo "ncu $1 rc=$?"
  $NCU --import $R/ncu-$1.ncu-rep --page details > $R/ncu-$1.txt 2>&1
  $NCU --import $R/ncu-$1.ncu-rep --page source --csv --print-source sass > $R/ncu-$1-source.csv 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers|Executed Ipc|Issue Slots|No Eligible|Warp Cycles Per Issued|L2 Hit" $R/ncu-$1.txt | head -20
done
for c in dyn sta dyn-noin; do cuobjdump -sass .device/scores-$c.cubin > $R/sass-$c.txt 2>&1; echo "sass $c $(wc -l < $R/sass-$c.txt)"; done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
