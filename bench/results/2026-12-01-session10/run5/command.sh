#!/usr/bin/env bash
# session 10, device call 5: the L2-hinted loads in three forms: 1 ld.global.nc + L2 hint (kiln so far),
# 2 the same + L1 priority, 3 ld.global + L1 priority + L2 hint (Triton's form); looped configs incl. Inductor's
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
cd $K/bin
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
P='"persistent": 0, "prefetch": 0, "stage": 0'
R1="rmsnorm [32768x4096 float32]"; R2="rmsnorm [4096x32768 float32]"; R3="rmsnorm [4096x32768 bfloat16]"
H1="softmax(-1) [32768x4096 bfloat16]"; H2="layernorm [32768x4096 bfloat16]"; H3="rmsnorm [32768x4096 bfloat16]"
H4="residual+rmsnorm [32768x4096 bfloat16]"; H5="layernorm [32768x4096 float32]"
S1="sum(-1) [32768x4096 bfloat16]"; S2="sum(-1) [4096x32768 bfloat16]"; S3="sum(-1) [32768x4096 float32]"; S4="cross_entropy [8192x32768 bfloat16]"
bench default "" "$R1" "$R2" "$R3" "$H1" "$H2" "$H3" "$H4" "$H5" "$S1" "$S2" "$S3" "$S4"
for e in 1 2 3; do
  bench "heuristic form$e" "{\"evict\": $e}" "$H1" "$H2" "$H3" "$H4" "$H5" "$R3" "$S1" "$S2" "$S3" "$S4"
  bench "t512 u2 form$e" "{$P, \"evict\": $e, \"threads_per_row\": 512, \"threads\": 512, \"unroll\": 2}" "$R1" "$S3"
  bench "t128 u1 form$e" "{$P, \"evict\": $e, \"threads_per_row\": 128, \"threads\": 128, \"unroll\": 1}" "$R1"
  bench "t1024 u8 form$e" "{$P, \"evict\": $e, \"threads_per_row\": 1024, \"threads\": 1024, \"unroll\": 8}" "$R2"
  bench "t1024 u4 form$e" "{$P, \"evict\": $e, \"threads_per_row\": 1024, \"threads\": 1024, \"unroll\": 4}" "$R3"
  bench "t256 u2 form$e" "{$P, \"evict\": $e, \"threads_per_row\": 256, \"threads\": 256, \"unroll\": 2}" "$S1"
  bench "t512 u8 form$e" "{$P, \"evict\": $e, \"threads_per_row\": 512, \"threads\": 512, \"unroll\": 8}" "$S2"
done
bench default-again "" "$R1" "$R2" "$R3" "$H1" "$H2" "$H3" "$H4" "$H5" "$S1" "$S2" "$S3" "$S4"
echo "done $((SECONDS-S)) s" | tee -a $L
