#!/usr/bin/env bash
# Session 22 call 1: every [gpu] test at HEAD (776bca0: session 21's pointwise
# changes and review commit not yet run in full); small batches (rmsnorm and
# softmax 512x4096 bf16) under flushed do_bench: kiln's heuristic and config
# variants beside torch.compile and Triton; torch.compile's generated code;
# ncu (caches flushed per kernel) of each kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KK=$R/kk; mkdir -p $KK
for c in "" '{"persistent":1,"threads":512,"threads_per_row":512,"unroll":1,"vector":8}' \
  '{"persistent":1,"threads":128,"threads_per_row":128,"unroll":4,"vector":8}' \
  '{"persistent":1,"threads":1024,"threads_per_row":1024,"unroll":1,"vector":4}'; do
  KILN_ROW_CONFIG="$c" KILN_EXPORT_KERNELS=$KK timeout 60 $K/bin/bench_reduction "rmsnorm [512x4096" "softmax(-1) [512x4096" >> $R/bench-small.log 2>&1
done
echo "exports done $SECONDS s"
export KILN_KERNELS=$KK TRITON_CACHE_DIR=$R/tcache
TORCH_LOGS=output_code timeout 150 python3 .device/s22inv.py > $R/inv.log 2> $R/inv-code.log; echo "inv rc=$? $SECONDS s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
ROUNDS=0 NCU_LAUNCH=1 timeout 100 ncu --clock-control none --metrics $M -k regex:"kiln|triton" python3 .device/s22inv.py > $R/ncu.log 2>&1; echo "ncu rc=$? $SECONDS s"
for c in $R/tcache/*/*.cubin; do echo "== $c"; cuobjdump -sass "$c" 2>&1 || /usr/local/cuda/bin/cuobjdump -sass "$c"; done > $R/sass.txt 2>&1
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=330 KILN_DEADLINE_S=360 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
