#!/usr/bin/env bash
# Session 21 call 4: torch.compile's and kiln's x*y+z and x+y f32 32768x4096
# side by side under ncu (DRAM bytes, sectors, instructions, duration), and
# both kernels' SASS (cuobjdump), to find the 0.3% kiln trails by on x*y+z.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
export TRITON_CACHE_DIR=$R/tcache KILN_KERNELS=$PWD/.device/kk
timeout 120 python3 .device/pwsass.py > $R/run.log 2>&1; echo "py rc=$? $SECONDS s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_lookup_miss.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
timeout 240 ncu --clock-control none --metrics $M -k regex:"kiln|triton" python3 .device/pwsass.py > $R/ncu.log 2>&1; echo "ncu rc=$? $SECONDS s"
for c in $R/tcache/*/*.cubin .device/kk/*.cubin; do echo "== $c"; cuobjdump -sass "$c" 2>&1 || /usr/local/cuda/bin/cuobjdump -sass "$c"; done > $R/sass.txt 2>&1
find $R/tcache -name "*.json" -o -name "*.ptx" -o -name "*.ttgir" | head -20 > $R/tcache-files.txt
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
