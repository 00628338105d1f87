#!/usr/bin/env bash
# session 9, device call 2: looped parts in clusters (L2 hints) at 262144; the looped form with L2 hints
# (Inductor's form: pass 1 evict_last, pass 2 evict_first) over the 32768x4096 and 4096x32768 norms; cluster test
R=$PWD
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
P='"persistent": 0, "prefetch": 0, "stage": 0'
L1="softmax(-1) [1024x262144 float32]"; L2="layernorm [1024x262144 float32]"; L3="rmsnorm [1024x262144 float32]"
bench default "" "$L1" "$L2" "$L3"
for c in "8 512 4 1" "8 512 2 1" "16 512 2 1" "16 256 4 1" "8 256 4 1" "4 512 4 1" "8 512 4 0" "16 512 4 1"; do
  set -- $c
  bench "c$1t$2u$3e$4" "{$P, \"cluster\": $1, \"threads_per_row\": $2, \"unroll\": $3, \"evict\": $4}" "$L1" "$L2" "$L3"
done
for shape in 32768x4096 4096x32768; do for T in float32 bfloat16; do
  M1="softmax(-1) [$shape $T]"; M2="layernorm [$shape $T]"; M3="rmsnorm [$shape $T]"
  bench default "" "$M1" "$M2" "$M3"
  for t in 128 256 512; do for u in 1 2 4; do
    bench "loop t$t u$u evict" "{$P, \"cluster\": 1, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u, \"evict\": 1}" "$M1" "$M2" "$M3"
  done; done
done; done
bench default-again "" "$L1" "$L2" "$L3"
echo "bench done $((SECONDS-S)) s" | tee -a $L
timeout 280 ./kiln_tests "rows split across a thread-block cluster match the reference" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -20 | tee -a $L
echo "done $((SECONDS-S)) s" | tee -a $L
