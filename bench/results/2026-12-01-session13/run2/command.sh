#!/usr/bin/env bash
# Session 13, device call 2. B = 88deb9e+dirty (wip/welford-static-counts with an experiment-only knob,
# KILN_EXP_LD: the instruction of evict_first row loads). Read-only kernels (sums, cross_entropy) against the
# flush's dirty lines: load forms, flushed and not; clusters of 2/4 for held bf16/f32 rows of 32768;
# B's cluster GPU test (Welford trees).
mkdir -p /tmp/kB && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kB -xf -
S=$SECONDS; L=$OUT/log.txt
export KILN_CACHE=0
echo "B $(cat /tmp/kB/kiln/COMMIT)" | tee $L
bench() {  # cases...
  echo "== ROWS=$KILN_BENCH_ROWS NOFLUSH=$KILN_BENCH_NOFLUSH CFG=$KILN_ROW_CONFIG LD=$KILN_EXP_LD" | tee -a $L
  (cd /tmp/kB/kiln/bin && LD_LIBRARY_PATH=/tmp/kB/kiln/lib timeout 90 ./bench_reduction "$@" 2>&1) | grep -aE "kiln [0-9] kernel|error|FAIL" | sed 's/  */ /g' | tee -a $L
}
R="sum(-1) [32768x4096 bf"; F="sum(-1) [32768x4096 f"; C="cross_entropy [8192x32768"
for i in 1 2; do
  for ld in "" "ld.global.cs" "ld.global.cs.nc" "ld.global.nc.L1::no_allocate.L2::cache_hint" "ld.global.lu"; do
    KILN_EXP_LD="$ld" bench "$R"
    KILN_EXP_LD="$ld" KILN_ROW_CONFIG='{"evict":1}' bench "$F" "$C"
  done
  KILN_ROW_CONFIG='{"evict":0}' bench "$R"
  KILN_ROW_CONFIG='{"evict":2}' bench "$R" "$F"
  bench "$F" "$C"
done
KILN_BENCH_NOFLUSH=1 KILN_ROW_CONFIG='{"evict":0}' bench "$R" "$F" "$C"
KILN_BENCH_NOFLUSH=1 KILN_EXP_LD="ld.global.cs" KILN_ROW_CONFIG='{"evict":1}' bench "$R" "$F" "$C"
# Held rows of 32768 split over clusters (fill and drain per block halve).
H="softmax(-1) [4096x32768 bf"; LB="layernorm [4096x32768 bf"; LF="layernorm [4096x32768 f"
bench "$H" "$LB" "$LF"
for cfg in '{"cluster":2}' '{"cluster":2,"row_loop":0}' '{"cluster":4}' '{"cluster":4,"row_loop":0}'; do
  KILN_ROW_CONFIG="$cfg" bench "$H" "$LB" "$LF"
done
unset KILN_CACHE
K=/tmp/kB/kiln; export LD_LIBRARY_PATH=$K/lib
t() {
  (cd $K/bin && timeout $1 ./kiln_tests "$2" --reporter compact > $OUT/t.txt 2>&1)
  echo "test rc=$? $((SECONDS-S)) s [$2]: $(tail -c 300 $OUT/t.txt | tail -2 | tr '\n' ' ')" | tee -a $L; grep -aiE "failed|error" $OUT/t.txt | cut -c1-300 | head -10 | tee -a $L
}
t 330 "rows split across a thread-block cluster match the reference"
echo "done $((SECONDS-S)) s" | tee -a $L
