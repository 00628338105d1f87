#!/usr/bin/env bash
# session 8, device call 1: held rows with the next row prefetched (config "prefetch"): tests, then sweeps next to the heuristic
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS; L=$OUT/log.txt
echo "commit $(cat $K/COMMIT)" | tee $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a $L
run() { timeout $1 ./kiln_tests "$2" --reporter compact 2>&1 | tail -3 > $OUT/t.txt; echo "rc=${PIPESTATUS[0]} $((SECONDS-S)) s: $2: $(tail -2 $OUT/t.txt | tr '\n' ' ')" | tee -a $L; }
bench() {  # label, config, cases...
  local lab=$1 C=$2; shift 2
  echo "== $lab $C" | tee -a $L
  KILN_ROW_CONFIG="$C" timeout 90 ./bench_reduction "$@" 2>&1 | grep -E "kiln [0-9] kernel|FAIL|rror" | sed 's/  */ /g' | tee -a $L
}
run 150 "held rows with the next row prefetched match the reference"
bench default "" "[32768x4096" "[4096x32768" "[1024x262144"
bench prefetch '{"prefetch": 1}' "[32768x4096" "[4096x32768" "[1024x262144"
bench prefetch-held-512 '{"persistent": 1, "stage": 0, "prefetch": 1, "threads_per_row": 512}' "softmax(-1) [4096x32768 bfloat16]" "layernorm [4096x32768 bfloat16]"
bench prefetch-1024 '{"prefetch": 1, "threads_per_row": 1024}' "[4096x32768 float32]" "rmsnorm [4096x32768 bfloat16]" "[1024x262144"
bench prefetch-128 '{"prefetch": 1, "threads_per_row": 128}' "softmax(-1) [32768x4096 bfloat16]" "rmsnorm [32768x4096 bfloat16]" "layernorm [32768x4096" "rmsnorm [32768x4096 float32]"
bench prefetch-512 '{"prefetch": 1, "threads_per_row": 512}' "softmax(-1) [32768x4096 bfloat16]" "rmsnorm [32768x4096 bfloat16]" "layernorm [32768x4096"
bench sum-held-256 '{"persistent": 1, "prefetch": 1, "threads_per_row": 256}' "sum(-1) [32768x4096" "sum(-1) [4096x32768"
bench sum-held-512 '{"persistent": 1, "prefetch": 1, "threads_per_row": 512}' "sum(-1) [32768x4096" "sum(-1) [4096x32768"
bench sum-held-noprefetch-256 '{"persistent": 1, "threads_per_row": 256}' "sum(-1) [32768x4096"
echo "sweeps $((SECONDS-S)) s" | tee -a $L
run 120 "rows split across a thread-block cluster match the reference"
run 40 "a row kernel's grid tail*"
rm -f $OUT/t.txt
echo "done $((SECONDS-S)) s" | tee -a $L
