#!/usr/bin/env bash
# session 10, device call 4: Inductor's autotuned launch configs for the norms and sums; looped rmsnorm with
# L2 hints over threads x unroll at both shapes (f32, bf16)
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
(cd /tmp && timeout 200 python3 $R/.device/inductor_configs.py) > $OUT/ind.txt 2>&1
echo "inductor rc=$? $((SECONDS-S)) s" | tee -a $L; grep -E "^\w+ \[|^ok|rror" $OUT/ind.txt | cut -c1-300 | tee -a $L
cd $K/bin
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
R1="rmsnorm [32768x4096 float32]"; R2="rmsnorm [4096x32768 float32]"; R3="rmsnorm [4096x32768 bfloat16]"
P='"persistent": 0, "prefetch": 0, "stage": 0, "evict": 1'
bench default "" "$R1" "$R2" "$R3"
for t in 64 128 256 512 1024; do for u in 1 2 4 8; do
  bench "loop t$t u$u evict" "{$P, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u}" "$R1" "$R2" "$R3"
done; done
bench default-again "" "$R1" "$R2" "$R3"
echo "done $((SECONDS-S)) s" | tee -a $L
