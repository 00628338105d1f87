#!/usr/bin/env bash
# session 12, device call 1: experiments, no kernel change. (a) waves: the 4096/8192-row held cases at
# 4096, 4224 (= 132 x 32) and 3960 (= 132 x 30) rows; (b) bf16 sum 32768x4096 at 256 threads with evict;
# (c) clusters of 16 for the 1024x262144 norms (both layernorm weights fit in shared memory);
# (d) ncu stalls of layernorm 1024x262144; (e) unaligned-pointer and grid-tail reduction tests
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -10 | tee -a $L
}
bench() {  # config, cases...   (KILN_BENCH_ROWS from the caller's environment)
  echo "== KILN_ROW_CONFIG='$1' rows='$KILN_BENCH_ROWS'" | tee -a $L
  (cd $K/bin && KILN_ROW_CONFIG="$1" timeout 100 ./bench_reduction "${@:2}" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
(cd $K/bin && timeout 40 ./bench_reduction "rmsnorm [1024x262144" 2>&1) | grep -aE "TB/s|error|FAIL" | tee -a $L
rc=${PIPESTATUS[0]}; echo "first bench rc=$rc $((SECONDS-S)) s" | tee -a $L
[ "$rc" = 124 ] && exit 1
# (a) waves
for rows in 4096:4096,8192:8192 4096:4224,8192:8448 4096:3960,8192:7920 4096:4096,8192:8192; do
  r1=${rows%%,*}; r1=${r1#*:}; r2=${rows##*:}
  KILN_BENCH_ROWS=$rows bench "" "softmax(-1) [${r1}x32768" "layernorm [${r1}x32768" "cross_entropy [${r2}x32768"
done
# (b) bf16 sum at 32768x4096
for i in 1 2; do
  bench "" "sum(-1) [32768x4096 bf"
  for u in 1 2 4; do bench "{\"threads_per_row\": 256, \"threads\": 256, \"unroll\": $u, \"evict\": 1}" "sum(-1) [32768x4096 bf"; done
done
# (c) clusters of 16 at 1024x262144
for i in 1 2; do
  bench "" "softmax(-1) [1024x262144" "layernorm [1024x262144" "rmsnorm [1024x262144"
  bench '{"persistent": 1, "threads_per_row": 512, "threads": 512, "cluster": 16, "row_loop": 1}' "softmax(-1) [1024x262144" "layernorm [1024x262144" "rmsnorm [1024x262144"
done
# (d) ncu
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|smsp__issue_active\.avg\.pct_of_peak_sustained_active|dram__throughput\.avg\.pct_of_peak_sustained_elapsed|gpu__time_duration\.sum|sm__cycles_active\.avg|smsp__inst_executed\.sum|dram__bytes_read\.sum|dram__bytes_write\.sum|lts__t_bytes\.sum'
nc() {  # label, case
  (cd $K/bin && KILN_ROW_CONFIG="$3" timeout 100 ncu --clock-control none -k regex:kiln_row --launch-skip 5 --launch-count 1 --metrics "$M" ./bench_reduction "$2" > $OUT/ncu-$1.log 2>&1)
  echo "== ncu $1 rc=$? $((SECONDS-S)) s" | tee -a $L
  grep -aE 'stalled|issue_active|dram__|gpu__time|cycles_active|inst_executed|lts__' $OUT/ncu-$1.log | sed 's/  */ /g' | awk '$NF+0 > 0.05 || /dram|gpu__time|inst|cycles|lts/' | tee -a $L
}
nc layernorm262k "layernorm [1024x262144" ""
nc rmsnorm262k "rmsnorm [1024x262144" ""
nc softmaxbf16-32k "softmax(-1) [4096x32768 bf" ""
# (e) tests
t 60 "reduction kernels stay correct from unaligned base pointers"
t 60 "a row kernel's grid tail (cross_entropy's mean) is right launch after launch"
t 60 "cross_entropy*"
echo "done $((SECONDS-S)) s" | tee -a $L
