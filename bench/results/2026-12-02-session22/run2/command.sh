#!/usr/bin/env bash
# Session 22 call 2: small batches (rmsnorm and softmax 512x4096 bf16) under
# flushed do_bench: kiln's heuristic and config variants (512 threads with and
# without min_blocks 4, 256 threads at min_blocks 8, 128 threads) beside
# torch.compile and Triton, interleaved rounds; ncu (caches flushed per
# kernel) of each; launch host cost with bursts interleaved burst by burst, and floor.cu.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KK=$R/kk; mkdir -p $KK
for rows in 512 64; do
for c in "" '{"persistent":1,"threads":512,"threads_per_row":512,"unroll":1,"vector":8,"min_blocks":4}' \
  '{"persistent":1,"threads":512,"threads_per_row":512,"unroll":1,"vector":8}' \
  '{"persistent":1,"threads":256,"threads_per_row":256,"unroll":2,"vector":8,"min_blocks":8}' \
  '{"persistent":1,"threads":128,"threads_per_row":128,"unroll":4,"vector":8}'; do
  KILN_ROW_CONFIG="$c" KILN_EXPORT_KERNELS=$KK timeout 60 $K/bin/bench_reduction "rmsnorm [${rows}x4096" "softmax(-1) [${rows}x4096" >> $R/bench-small.log 2>&1
done; done
echo "exports done $SECONDS s"
export KILN_KERNELS=$KK TRITON_CACHE_DIR=$R/tcache
ROWS=512 timeout 150 python3 .device/s22inv.py > $R/inv.log 2>&1; echo "inv rc=$? $SECONDS s"
ROWS=64 ROUNDS=3 timeout 100 python3 .device/s22inv.py > $R/inv64.log 2>&1; echo "inv64 rc=$? $SECONDS s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
ROWS=512 ROUNDS=0 NCU_LAUNCH=1 timeout 100 ncu --clock-control none --metrics $M -k regex:"kiln|triton" python3 .device/s22inv.py > $R/ncu.log 2>&1; echo "ncu rc=$? $SECONDS s"
timeout 150 $K/bin/bench_pointwise launch > $R/launch.log 2>&1; echo "launch rc=$? $SECONDS s"
(cd $K/anchors && nvcc -arch=sm_90 -O2 floor.cu -o floor -lcuda -lnvrtc && timeout 60 ./floor) > $R/floor.log 2>&1; echo "floor rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
