#!/usr/bin/env bash
# Session 22 call 3: call 2's exported kernels (bench/results/.../run2/kk) under
# flushed do_bench beside torch.compile and Triton (s22inv.py), and ncu.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KK=$PWD/.device/kk2
export KILN_KERNELS=$KK TRITON_CACHE_DIR=$R/tcache
ROWS=512 timeout 150 python3 .device/s22inv.py > $R/inv.log 2>&1; echo "inv rc=$? $SECONDS s"
ROWS=64 ROUNDS=3 timeout 100 python3 .device/s22inv.py > $R/inv64.log 2>&1; echo "inv64 rc=$? $SECONDS s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
ROWS=512 ROUNDS=0 NCU_LAUNCH=1 timeout 100 ncu --clock-control none --metrics $M -k regex:"kiln|triton" python3 .device/s22inv.py > $R/ncu.log 2>&1; echo "ncu rc=$? $SECONDS s"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
