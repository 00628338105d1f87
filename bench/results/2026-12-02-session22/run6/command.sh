#!/usr/bin/env bash
# Session 22 call 6: the small batches again (bench_reduction, then
# anchors_reduction.py with kiln's exported kernels), the profiler's kernel
# times now taken after every other measurement (call 5's slowed later launches).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KK=$R/kk; mkdir -p $KK
F=("[1x4096" "[64x4096" "[512x4096" "[8x32768" "[8x128256")
KILN_EXPORT_KERNELS=$KK OUT=$R timeout 150 $K/bin/bench_reduction "${F[@]}" > $R/bench-reduction.log 2>&1; echo "bench rc=$? $SECONDS s"
(cd $K/anchors && KILN_KERNELS=$KK OUT=$R timeout 300 python3 anchors_reduction.py "${F[@]}") > $R/anchors-reduction.log 2>&1; echo "anchors rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
