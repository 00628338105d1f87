#!/usr/bin/env bash
# session 9, device call 1: clusters of 16 (non-portable) and small clusters at 2-4 blocks per SM
# (min_blocks) on the held rows that run one block per SM; Inductor's generated code for the f32 norms and fma
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
P='"persistent": 1, "prefetch": 0, "stage": 0, "evict": 0'
L1="softmax(-1) [1024x262144 float32]"; L2="layernorm [1024x262144 float32]"; L3="rmsnorm [1024x262144 float32]"
bench default "" "$L1" "$L2" "$L3"
bench c16t256mb2 "{$P, \"cluster\": 16, \"threads_per_row\": 256, \"min_blocks\": 2}" "$L1" "$L2" "$L3"
bench c16t256mb2-noloop "{$P, \"cluster\": 16, \"threads_per_row\": 256, \"min_blocks\": 2, \"row_loop\": 0}" "$L1" "$L2" "$L3"
bench c16t256 "{$P, \"cluster\": 16, \"threads_per_row\": 256}" "$L1" "$L2" "$L3"
bench c16t512 "{$P, \"cluster\": 16, \"threads_per_row\": 512}" "$L1" "$L2" "$L3"
for T in bfloat16 float32; do
  M1="softmax(-1) [4096x32768 $T]"; M2="layernorm [4096x32768 $T]"; M3="rmsnorm [4096x32768 $T]"
  bench default "" "$M1" "$M2" "$M3"
  bench c2t256mb2 "{$P, \"cluster\": 2, \"threads_per_row\": 256, \"min_blocks\": 2}" "$M1" "$M2" "$M3"
  bench c4t128mb4 "{$P, \"cluster\": 4, \"threads_per_row\": 128, \"min_blocks\": 4}" "$M1" "$M2" "$M3"
  bench c4t256mb2 "{$P, \"cluster\": 4, \"threads_per_row\": 256, \"min_blocks\": 2}" "$M1" "$M2" "$M3"
  bench c4t256mb3 "{$P, \"cluster\": 4, \"threads_per_row\": 256, \"min_blocks\": 3}" "$M1" "$M2" "$M3"
  bench c8t128mb4 "{$P, \"cluster\": 8, \"threads_per_row\": 128, \"min_blocks\": 4}" "$M1" "$M2" "$M3"
done
bench default-again "" "$L1" "$L2" "$L3" "[4096x32768"
echo "bench done $((SECONDS-S)) s" | tee -a $L
timeout 200 ./kiln_tests "rows split across a thread-block cluster match the reference" --reporter compact > $OUT/t.txt 2>&1
echo "test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -20 | tee -a $L
(cd $K/anchors && TORCHINDUCTOR_CACHE_DIR=/tmp/ind timeout 150 python3 $R/.device/inductor_dump.py) > $OUT/ind.log 2>&1
echo "inductor rc=$? $((SECONDS-S)) s" | tee -a $L
(cd /tmp/ind && find . \( -name "*.py" -o -name "*.ptx" \) -size -400k | tar -czf $OUT/ind.tgz -T -)
echo "done $((SECONDS-S)) s" | tee -a $L
