#!/usr/bin/env bash
# session 8, device call 3: min_blocks (nvvm.minctasm: registers capped so more blocks fit) on the held rows below full occupancy
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
bench default "" "layernorm [32768x4096" "rmsnorm [32768x4096" "residual+rmsnorm" "layernorm [4096x32768 bfloat16]"
bench mb4 '{"min_blocks": 4}' "rmsnorm [32768x4096 float32]"
bench mb6 '{"min_blocks": 6}' "layernorm [32768x4096 float32]" "rmsnorm [32768x4096 bfloat16]"
bench mb8 '{"min_blocks": 8}' "layernorm [32768x4096 float32]" "rmsnorm [32768x4096 bfloat16]" "layernorm [32768x4096 bfloat16]"
bench mb12 '{"min_blocks": 12}' "layernorm [32768x4096 bfloat16]"
bench mb16 '{"min_blocks": 16}' "residual+rmsnorm"
bench mb24 '{"min_blocks": 24}' "residual+rmsnorm"
bench default-again "" "layernorm [32768x4096" "rmsnorm [32768x4096"
echo "done $((SECONDS-S)) s" | tee -a $L
