#!/usr/bin/env bash
# session 12, device call 3: softmax at 32768x4096 after 976828a (B): f32 lost 2.4% (5 -> 6 blocks per SM at 40
# registers?), bf16 0.4% (10 -> 9 blocks). Config sweeps with B, A's defaults, and ncu (occupancy, DRAM bytes) A vs B
R=$PWD
for v in A B; do
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-old.tar.xz
  mkdir -p /tmp/k$v && xz -dc $f | tar -C /tmp/k$v -xf -
done
export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "A $(cat /tmp/kA/kiln/COMMIT) B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
bench() {  # variant, config, cases...
  echo "== $1 '$2'" | tee -a $L
  (cd /tmp/k$1/kiln/bin && LD_LIBRARY_PATH=/tmp/k$1/kiln/lib KILN_ROW_CONFIG="$2" timeout 60 ./bench_reduction "${@:3}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
F="softmax(-1) [32768x4096 float32]"; H="softmax(-1) [32768x4096 bfloat16]"
(cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout 40 ./bench_reduction "$F" 2>&1) | grep -aE "TB/s|error|FAIL" | tee -a $L
rc=${PIPESTATUS[0]}; echo "first bench rc=$rc $((SECONDS-S)) s" | tee -a $L
[ "$rc" = 124 ] && exit 1
bench A "" "$F" "$H"
bench B "" "$F" "$H"
for t in 128 256 512 1024; do for u in 1 2 4 8; do
  [ $((t*u*4)) -gt 8192 ] && continue; [ $((t*u*4)) -lt 1024 ] && continue
  for e in 1 2; do bench B "{\"persistent\": 0, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u, \"evict\": $e}" "$F"; done
done; done
for t in 256 512 1024; do bench B "{\"persistent\": 1, \"threads_per_row\": $t, \"threads\": $t}" "$F"; done
for t in 64 128 256 512; do for u in 1 2 4; do
  [ $((t*u*8)) -gt 8192 ] && continue; [ $((t*u*8)) -lt 1024 ] && continue
  bench B "{\"persistent\": 0, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u, \"evict\": 1}" "$H"
done; done
for t in 128 256 512; do bench B "{\"persistent\": 1, \"threads_per_row\": $t, \"threads\": $t}" "$H"; done
bench A "" "$F" "$H"
bench B "" "$F" "$H"
M='sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sector_hit_rate.pct,launch__occupancy_limit_registers,launch__registers_per_thread'
for v in A B; do
  (cd /tmp/k$v/kiln/bin && LD_LIBRARY_PATH=/tmp/k$v/kiln/lib timeout 60 ncu --clock-control none -k regex:kiln_row --launch-skip 5 --launch-count 1 --metrics "$M" ./bench_reduction "$F" > $OUT/ncu-$v.log 2>&1)
  echo "== ncu $v rc=$? $((SECONDS-S)) s" | tee -a $L
  grep -aE "sm__|dram__|gpu__|lts__|launch__" $OUT/ncu-$v.log | sed 's/  */ /g' | tee -a $L
done
echo "done $((SECONDS-S)) s" | tee -a $L
