#!/usr/bin/env bash
# session 9, device call 3: layernorm looped with L2 hints in two passes + output pass (mean, squared deviations
# re-read from the cache); repeats of the looped-with-hints picks of call 2 next to the heuristic; the evict test
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
P='"persistent": 0, "prefetch": 0, "stage": 0, "cluster": 1, "evict": 1'
for shape in 32768x4096 4096x32768; do
  M1="layernorm [$shape float32]"; M2="layernorm [$shape bfloat16]"
  bench default "" "$M1" "$M2"
  for t in 128 256 512; do for u in 1 2 4; do
    bench "loop t$t u$u evict" "{$P, \"threads_per_row\": $t, \"threads\": $t, \"unroll\": $u}" "$M1" "$M2"
  done; done
done
for round in 1 2; do
  bench "default r$round" "" "[32768x4096"
  bench "rms-bf16 t256u2 r$round" "{$P, \"threads_per_row\": 256, \"threads\": 256, \"unroll\": 2}" "rmsnorm [32768x4096 bfloat16]"
  bench "rms-f32 t128u1 r$round" "{$P, \"threads_per_row\": 128, \"threads\": 128, \"unroll\": 1}" "rmsnorm [32768x4096 float32]"
  bench "res t512u1 r$round" "{$P, \"threads_per_row\": 512, \"threads\": 512, \"unroll\": 1}" "residual+rmsnorm"
  bench "res t512u2 r$round" "{$P, \"threads_per_row\": 512, \"threads\": 512, \"unroll\": 2}" "residual+rmsnorm"
  bench "softmax-bf16 t128u4 r$round" "{$P, \"threads_per_row\": 128, \"threads\": 128, \"unroll\": 4}" "softmax(-1) [32768x4096 bfloat16]"
  bench "softmax-bf16 t128u2 r$round" "{$P, \"threads_per_row\": 128, \"threads\": 128, \"unroll\": 2}" "softmax(-1) [32768x4096 bfloat16]"
  bench "sum t128u4 evict r$round" "{$P, \"threads_per_row\": 128, \"threads\": 128, \"unroll\": 4}" "sum(-1) [32768x4096 bfloat16]" "sum(-1) [4096x32768 bfloat16]"
done
echo "bench done $((SECONDS-S)) s" | tee -a $L
timeout 100 ./kiln_tests "looped rows with L2 eviction hints match the reference" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -20 | tee -a $L
timeout 100 ./kiln_tests "row-wise composites at 4096 x 32768*" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -20 | tee -a $L
echo "done $((SECONDS-S)) s" | tee -a $L
