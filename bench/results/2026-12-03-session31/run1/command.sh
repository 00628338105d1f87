#!/usr/bin/env bash
# Session 31 call 1: (a) the looped cluster over a dynamic row length's GPU
# test (written in session 30, never run); (b) dynamic long rows under the
# heuristic and under looped-cluster configs (KILN_ROW_CONFIG merges onto
# the heuristic's config), the static kernels beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 200 stdbuf -oL $K/bin/kiln_tests -d yes "rows of a dynamic length split across a looped cluster (a config) match the reference" > "$R/test.log" 2>&1
echo "test rc=$? $SECONDS s"; grep -E "passed|failed|FAILED|SKIPPED" "$R/test.log" | tail -5
L="softmax(-1) (dynamic N) [1024x262144 float32]"; M="rmsnorm (dynamic N) [1024x262144 float32]"
S="layernorm (dynamic N) [4096x32768 bfloat16]"; T="layernorm (dynamic N) [4096x32768 float32]"
U="softmax(-1) (dynamic N) [4096x32768 bfloat16]"; V="layernorm (dynamic N) [8192x16384 bfloat16]"
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  env ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | cut -c1-160; grep -h "config" "$R/bench-$i.log" | cut -c1-230; }
run "" "$L" "$M" "softmax(-1) [1024x262144 float32]" "rmsnorm [1024x262144 float32]" "$S" "$T" "$U" "$V"
run '{"cluster": 16}' "$L" "$M"
run '{"cluster": 16, "min_blocks": 2}' "$L" "$M"
run '{"cluster": 8, "min_blocks": 2}' "$L" "$M"
run '{"cluster": 16, "threads_per_row": 256, "threads": 256, "min_blocks": 4}' "$L" "$M"
run '{"cluster": 2}' "$S" "$T" "$U" "$V"
run '{"cluster": 4}' "$S" "$T" "$U" "$V"
run '{"cluster": 4, "unroll": 2, "min_blocks": 2}' "$S" "$T" "$U" "$V"
run '{"unroll": 2, "min_blocks": 2}' "$S" "$T" "$U" "$V"
run '{"cluster": 2, "unroll": 2, "min_blocks": 2}' "$S" "$T" "$U" "$V"
run '{"cluster": 4, "threads_per_row": 256, "threads": 256}' "$S" "$T" "$U" "$V"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
