#!/usr/bin/env bash
# session 10, device call 3: held rows read with evict_first (config evict on the held form) at 4096x32768;
# Inductor's autotuned launch configs for the norms and sums; the prefetch test with a longer cap
R=$PWD
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
A1="softmax(-1) [4096x32768 bfloat16]"; A2="layernorm [4096x32768 bfloat16]"; A3="rmsnorm [4096x32768 bfloat16]"
F1="softmax(-1) [4096x32768 float32]"; F2="layernorm [4096x32768 float32]"; F3="rmsnorm [4096x32768 float32]"
bench default "" "$A1" "$A2" "$A3" "$F1" "$F2" "$F3"
bench held-evict '{"evict": 1}' "$A1" "$A2" "$F1" "$F2" "$F3"
bench held-mb2-evict '{"persistent": 1, "prefetch": 0, "stage": 0, "evict": 1, "threads_per_row": 512, "threads": 512, "min_blocks": 2}' "$A3"
bench held-mb2 '{"persistent": 1, "prefetch": 0, "stage": 0, "evict": 0, "threads_per_row": 512, "threads": 512, "min_blocks": 2}' "$A3"
bench default-again "" "$A1" "$A2" "$A3" "$F1" "$F2" "$F3"
echo "bench done $((SECONDS-S)) s" | tee -a $L
(cd $K/anchors 2>/dev/null || cd $R; timeout 200 python3 $R/.device/inductor_configs.py) > $OUT/ind.txt 2>&1
echo "inductor rc=$? $((SECONDS-S)) s" | tee -a $L; grep -E "^\w+ \[|ok|rror" $OUT/ind.txt | cut -c1-260 | tee -a $L
(cd $K/bin && timeout 240 ./kiln_tests "held rows with the next row prefetched match the reference" --reporter compact > $OUT/t.txt 2>&1)
echo "prefetch test rc=$? $((SECONDS-S)) s: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; grep -iE "failed|error" $OUT/t.txt | head -10 | tee -a $L
echo "done $((SECONDS-S)) s" | tee -a $L
