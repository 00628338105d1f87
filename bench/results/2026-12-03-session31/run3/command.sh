#!/usr/bin/env bash
# Session 31 call 3: (a) the looped-cluster GPU test, now with one-step
# entries in the cluster (one_step 8); (b) the heuristic's new looped rebuild
# (layernorm bf16 dynamic 32768: unroll 2, min_blocks 2); (c) dynamic long
# rows with each block's part held in one step of a looped cluster.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
L="softmax(-1) (dynamic N) [1024x262144 float32]"; M="rmsnorm (dynamic N) [1024x262144 float32]"
S="layernorm (dynamic N) [4096x32768 bfloat16]"; T="layernorm (dynamic N) [4096x32768 float32]"
U="softmax(-1) (dynamic N) [4096x32768 float32]"; V="rmsnorm (dynamic N) [4096x32768 float32]"
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  env ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-130; grep -h "config {" "$R/bench-$i.log" | cut -c30-230; }
run '' "$S" "$T" "$U" "$V" "$L" "$M" "layernorm (dynamic N) [8192x16384 bfloat16]" "softmax(-1) (dynamic N) [4096x32768 bfloat16]" "rmsnorm (dynamic N) [4096x32768 bfloat16]"
run '{"cluster": 16, "threads_per_row": 1024, "threads": 1024, "one_step": 4}' "$L" "$M"
run '{"cluster": 16, "threads_per_row": 512, "threads": 512, "one_step": 8}' "$L" "$M"
run '{"cluster": 16, "threads_per_row": 512, "threads": 512, "min_blocks": 2}' "$L" "$M"
run '{"cluster": 2, "threads_per_row": 1024, "threads": 1024, "one_step": 4}' "$U" "$V" "$T"
run '{"cluster": 2, "threads_per_row": 512, "threads": 512, "one_step": 8}' "$U" "$V" "$T"
run '{"cluster": 2, "threads_per_row": 512, "threads": 512, "min_blocks": 2}' "$U" "$V" "$T"
run '{"cluster": 4, "threads_per_row": 512, "threads": 512, "one_step": 4}' "$U" "$V" "$T"
timeout 240 stdbuf -oL $K/bin/kiln_tests -d yes "rows of a dynamic length split across a looped cluster (a config) match the reference" > "$R/test.log" 2>&1
echo "test rc=$? $SECONDS s"; grep -E "passed|failed|FAILED|SKIPPED" "$R/test.log" | tail -5
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
