#!/usr/bin/env bash
# session 10, device call 6: hinted loads with the same L1 priority (evict 1: .nc, evict 2: coherent) over
# looped configs at 4096x32768 (bf16, f32) and the f32 norms at 32768x4096, next to the heuristic
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
A="softmax(-1) [4096x32768"; B="layernorm [4096x32768"; C="rmsnorm [4096x32768"
W="softmax(-1) [32768x4096 float32]"; X="layernorm [32768x4096 float32]"; Y="rmsnorm [32768x4096 float32]"
bench default "" "$A" "$B" "$C" "$W" "$X" "$Y"
for e in 1 2; do
  for t in 512 1024; do for u in 2 4 8; do
    bench "t$t u$u e$e" "{$P, \"evict\": $e, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u}" "$A" "$B" "$C"
  done; done
  for t in 128 256 512; do for u in 1 2 4; do
    bench "t$t u$u e$e" "{$P, \"evict\": $e, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u}" "$W" "$X" "$Y"
  done; done
done
bench default-again "" "$A" "$B" "$C" "$W" "$X" "$Y"
echo "done $((SECONDS-S)) s" | tee -a $L
