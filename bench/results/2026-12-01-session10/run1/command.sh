#!/usr/bin/env bash
# session 10, device call 1: held bf16 rows packed (2 blocks per SM at 512 threads) at 4096x32768;
# f32 held rows with weights loaded in the last pass; read-only kernels (sums, cross_entropy) with
# evict_first and how many bytes the L2 flush's dirty lines add (ncu, caches not flushed by ncu)
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a $L
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
A1="softmax(-1) [4096x32768 bfloat16]"; A2="layernorm [4096x32768 bfloat16]"; A3="rmsnorm [4096x32768 bfloat16]"
H='"persistent": 1, "prefetch": 0, "stage": 0, "evict": 0'
bench default "" "$A1" "$A2" "$A3"
bench held512 "{$H, \"threads_per_row\": 512, \"threads\": 512}" "$A1" "$A2" "$A3"
bench held512-mb2 "{$H, \"threads_per_row\": 512, \"threads\": 512, \"min_blocks\": 2}" "$A1" "$A2" "$A3"
bench held1024 "{$H, \"threads_per_row\": 1024, \"threads\": 1024}" "$A1" "$A2" "$A3"
bench held512-u2 "{$H, \"threads_per_row\": 512, \"threads\": 512, \"unroll\": 2}" "$A1" "$A2" "$A3"
bench default-f32 "" "softmax(-1) [4096x32768 float32]" "layernorm [4096x32768 float32]" "rmsnorm [4096x32768 float32]"
C1="sum(-1) [32768x4096 bfloat16]"; C2="sum(-1) [4096x32768 bfloat16]"; C3="sum(-1) [32768x4096 float32]"; C4="cross_entropy [8192x32768 bfloat16]"
bench default "" "$C1" "$C2" "$C3" "$C4"
bench evict '{"evict": 1}' "$C1" "$C2" "$C3" "$C4"
bench evict-t256 '{"evict": 1, "threads_per_row": 256, "threads": 256}' "$C1" "$C2" "$C3" "$C4"
bench evict-t512 '{"evict": 1, "threads_per_row": 512, "threads": 512}' "$C1" "$C2" "$C3" "$C4"
bench u8 '{"unroll": 8}' "$C1" "$C2" "$C3" "$C4"
bench evict-u8 '{"evict": 1, "unroll": 8}' "$C1" "$C2" "$C3" "$C4"
bench default-again "" "$A1" "$A2" "$A3" "$C1" "$C4"
echo "bench done $((SECONDS-S)) s" | tee -a $L
nc() {  # label, config, case, extra ncu args
  KILN_ROW_CONFIG="$2" timeout 90 ncu --clock-control none -k regex:kiln_row --launch-skip 5 --launch-count 1 $4 ./bench_reduction "$3" > $OUT/ncu-$1.log 2>&1
  echo "== ncu $1 rc=$? $((SECONDS-S)) s" | tee -a $L
  grep -E 'dram__bytes|gpu__time|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occ|Block Limit|Registers Per|Waves|Warp Cycles Per Issued|No Eligible' $OUT/ncu-$1.log | sed 's/  */ /g' | tee -a $L
}
M="--cache-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
nc sumbf16 "" "$C1" "$M"
nc sumbf16-evict '{"evict": 1}' "$C1" "$M"
nc ce "" "$C4" "$M"
nc ce-evict '{"evict": 1}' "$C4" "$M"
nc lnbf16-held512 "{$H, \"threads_per_row\": 512, \"threads\": 512}" "$A2" "$M"
nc lnbf16-held512-occ "{$H, \"threads_per_row\": 512, \"threads\": 512}" "$A2" "--section Occupancy --section SpeedOfLight --section LaunchStats --section WarpStateStats"
nc smbf16-held512-occ "{$H, \"threads_per_row\": 512, \"threads\": 512}" "$A1" "--section Occupancy --section SpeedOfLight --section LaunchStats --section WarpStateStats"
tar -C $OUT -czf $OUT/ncu.tgz $(cd $OUT && ls ncu-*.log) && rm -f $OUT/ncu-*.log
echo "done $((SECONDS-S)) s" | tee -a $L
