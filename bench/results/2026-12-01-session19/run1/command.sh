#!/usr/bin/env bash
# Session 19 call 1: does a held cluster row kernel (1024x262144 f32, clusters
# of 8, one block per SM) scale with the SMs it gets? The same kernels capped
# at 14, 12, 10 and 8 clusters (row config max_blocks); and how many
# clusters of each size fit on the H200 (bench/probes/cluster_occupancy.cu).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
( cd /tmp && /usr/local/cuda/bin/nvcc -arch=sm_90 -O2 -o co "$OLDPWD/bench/probes/cluster_occupancy.cu" && timeout 60 ./co ) > "$R/cluster-occupancy.log" 2>&1
echo "probe rc=$? $SECONDS s"; head -c 6000 "$R/cluster-occupancy.log"
for cfg in '' '{"max_blocks":112}' '{"max_blocks":96}' '{"max_blocks":80}' '{"max_blocks":64}' ''; do
  echo "== ${cfg:-heuristic} $SECONDS s"
  KILN_ROW_CONFIG="$cfg" timeout 60 "$K/bin/bench_reduction" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "layernorm [1024x262144" 2>&1 | tee -a "$R/scaling.log" | grep -i "TB/s\|error" | head -10
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
