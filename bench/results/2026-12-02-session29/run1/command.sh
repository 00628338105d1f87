#!/usr/bin/env bash
# Session 29 call 1: f32 1024x262144 rows split across a cluster of 16
# blocks, one block per SM, the next row prefetched by bulk copies
# (prefetch 1) and the weights resident in shared memory beside it, at 512
# and 1024 threads, against the heuristic (layernorm: clusters of 8, one
# block per SM, b from L2; softmax/rmsnorm: clusters of 16, two blocks per
# SM). Two rounds; round 1 exports every variant, then anchors_reduction.py
# times all of them next to eager and torch.compile (its variant path's
# first GPU run).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
R=$OUT/r; mkdir -p "$R/k"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
B=$K/bin/bench_reduction
sweep() { env $EXP KILN_ROW_CONFIG="$2" KILN_CACHE_DIR=/tmp/cache-s timeout 90 $B "$1" > sw.log 2>&1; echo "${2:-heuristic} :: $(grep -h 'kiln [0-9] kernel\|FAIL\|rror' sw.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-100)"; cat sw.log >> "$R/sweeps.log"; }
cd "$R"
P='"cluster": 16, "prefetch": 1, "min_blocks": 0'
for round in 1 2; do
  echo "=== round $round ($SECONDS s)"
  EXP=""; [ $round = 1 ] && EXP="KILN_EXPORT_KERNELS=$R/k"
  for op in layernorm rmsnorm "softmax(-1)"; do
    c="$op [1024x262144 float32]"
    sweep "$c" ""
    sweep "$c" "{$P}"
    sweep "$c" "{$P, \"threads\": 1024, \"threads_per_row\": 1024}"
    [ "$op" = layernorm ] && sweep "$c" "{$P, \"resident\": 0}"
  done
done
cut -c1-100 "$R/k/kernels.jsonl"
echo "=== anchors ($SECONDS s)"
(cd "$ROOT/bench" && env PYTHONUNBUFFERED=1 OUT="$R" KILN_KERNELS="$R/k" timeout 200 python3 anchors_reduction.py "layernorm [1024x262144" "rmsnorm [1024x262144" "softmax(-1) [1024x262144") 2>&1 | grep -v Warning > "$R/anchors.log"
grep -h "kiln\|torch.compile\|eager\|Triton" "$R/anchors.log" | sed 's/  */ /g' | cut -c1-140
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
