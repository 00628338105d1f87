#!/usr/bin/env bash
# Session 34 call 2: the reduction rows where torch.compile led kiln by
# 0.2-0.3% (layernorm and sum f32 32768x4096, rmsnorm f32 4096x32768):
# kiln's heuristic beside the anchors (kiln's cubins under do_bench too),
# held/looped variants by KILN_ROW_CONFIG, and what torch.compile launches
# (bench/probe_anchor_kernels.py reduction: Inductor's chosen configs and
# Triton source); then the split-rows probe again with its fixed check.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
C=("layernorm [32768x4096 float32" "sum(-1) [32768x4096 float32" "rmsnorm [4096x32768 float32")
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
B KILN_EXPORT_KERNELS=$R/kk timeout 60 $K/bin/bench_reduction "${C[@]}" > "$R/bench-1.log" 2>&1
echo "== [1] heuristic rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-1.log" | grep -v "copy roof" | cut -c1-120
(cd $K/anchors && env PYTHONUNBUFFERED=1 KILN_ANCHOR_BUDGET_S=150 KILN_KERNELS=$R/kk timeout 220 python3 anchors_reduction.py "${C[@]}") > "$R/anchors.log" 2>&1
echo "== anchors rc=$? $SECONDS s"; grep -v Warning "$R/anchors.log" | grep "TB/s\|us" | head -30
i=1
for cfg in '{"persistent":1,"threads":256,"threads_per_row":256,"evict":0,"l2_prefetch":384}' \
           '{"persistent":1,"threads":512,"threads_per_row":512,"evict":0,"l2_prefetch":384}' \
           '{"persistent":1,"threads":1024,"threads_per_row":1024,"evict":0,"l2_prefetch":384}' \
           '{"persistent":1,"threads":256,"threads_per_row":256,"evict":0}' \
           '{"persistent":0,"threads":256,"threads_per_row":256,"unroll":4,"evict":0}' \
           '{"persistent":0,"threads":512,"threads_per_row":512,"unroll":2}'; do
  i=$((i+1)); [ $SECONDS -gt 330 ] && break
  B KILN_ROW_CONFIG="$cfg" timeout 40 $K/bin/bench_reduction "layernorm [32768x4096 float32" "sum(-1) [32768x4096 float32" > "$R/bench-$i.log" 2>&1
  echo "== [$i] $cfg rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-120
done
if [ $SECONDS -lt 380 ]; then
  export TORCHINDUCTOR_CACHE_DIR=$R/inductor TRITON_CACHE_DIR=$R/triton
  timeout 150 python3 bench/probe_anchor_kernels.py "$R/probe" reduction 2>&1 | grep -v Warning | tee "$R/probe.log" | head -40
  find "$R/inductor" -name "*.best_config" -exec sh -c 'echo "$1"; cat "$1"; echo' _ {} \; 2>/dev/null | head -30
  rm -f $R/probe/trace-*.json; rm -rf "$R/triton"
fi
[ $SECONDS -lt 470 ] && { timeout 60 .device/split_rows layernorm > "$R/split.log" 2>&1; echo "== split rc=$? $SECONDS s"; cat "$R/split.log"; }
[ $SECONDS -lt 520 ] && { B timeout 40 $K/bin/bench_reduction "${C[@]}" > "$R/bench-9.log" 2>&1; echo "== [9] heuristic again rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-9.log" | grep -v "copy roof" | cut -c1-120; }
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
