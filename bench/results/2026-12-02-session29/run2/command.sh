#!/usr/bin/env bash
# Session 29 call 2: f32 softmax / rmsnorm 32768x4096, the new heuristic
# (held at 512 threads, the L2 fetch ahead) against the old loop (an
# override), two rounds in bench_reduction; round 1 exports both, then
# anchors_reduction.py times both exported variants next to eager and
# torch.compile in one process (its variant path's first GPU run).
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
SM='{"persistent": 0, "evict": 1, "threads": 256, "threads_per_row": 256, "unroll": 4, "vector": 4, "l2_prefetch": 0}'
RM='{"persistent": 0, "evict": 2, "threads": 512, "threads_per_row": 512, "unroll": 2, "vector": 4, "l2_prefetch": 0}'
for round in 1 2 3; do
  echo "=== round $round ($SECONDS s)"
  EXP=""; [ $round = 1 ] && EXP="KILN_EXPORT_KERNELS=$R/k"
  sweep "softmax(-1) [32768x4096 float32]" ""
  sweep "softmax(-1) [32768x4096 float32]" "$SM"
  sweep "rmsnorm [32768x4096 float32]" ""
  sweep "rmsnorm [32768x4096 float32]" "$RM"
done
cut -c1-110 "$R/k/kernels.jsonl"
echo "=== anchors ($SECONDS s)"
(cd "$ROOT/bench" && env PYTHONUNBUFFERED=1 OUT="$R" KILN_KERNELS="$R/k" timeout 200 python3 anchors_reduction.py "softmax(-1) [32768x4096 float32]" "rmsnorm [32768x4096 float32]") 2>&1 | grep -v Warning > "$R/anchors.log"
grep -h "kiln\|torch.compile\|eager\|Triton\|rror" "$R/anchors.log" | sed 's/  */ /g' | cut -c1-160
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
