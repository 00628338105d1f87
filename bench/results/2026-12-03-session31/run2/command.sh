#!/usr/bin/env bash
# Session 31 call 2: dynamic long rows under looped-cluster configs, now
# merged onto the heuristic's config for the launched length (call 1's
# sweeps merged onto the unhinted 128-thread build): which form to make
# the heuristic's.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
L="softmax(-1) (dynamic N) [1024x262144 float32]"; M="rmsnorm (dynamic N) [1024x262144 float32]"
S="layernorm (dynamic N) [4096x32768 bfloat16]"; T="layernorm (dynamic N) [4096x32768 float32]"
U="softmax(-1) (dynamic N) [4096x32768 bfloat16]"; V="layernorm (dynamic N) [8192x16384 bfloat16]"
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  env ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-130; grep -h "config {" "$R/bench-$i.log" | cut -c1-230; }
P='"threads_per_row": 512, "threads": 512'
run '' "$L" "$M" "$S" "$T" "$U" "$V"
run "{\"cluster\": 16, $P}" "$L" "$M"
run "{\"cluster\": 16, $P, \"min_blocks\": 2}" "$L" "$M"
run "{\"cluster\": 16, $P, \"min_blocks\": 2, \"unroll\": 4}" "$L" "$M"
run "{\"cluster\": 16, $P, \"min_blocks\": 2, \"evict\": 0}" "$L" "$M"
run "{\"cluster\": 8, $P, \"min_blocks\": 2}" "$L" "$M"
run '{"cluster": 16, "threads_per_row": 1024, "threads": 1024}' "$L" "$M"
run '{"cluster": 16, "threads_per_row": 256, "threads": 256, "min_blocks": 2}' "$L" "$M"
run "{\"cluster\": 2, $P}" "$S" "$T" "$U" "$V"
run "{\"cluster\": 2, $P, \"unroll\": 2, \"min_blocks\": 2}" "$S" "$T" "$U" "$V"
run "{\"cluster\": 4, $P, \"unroll\": 2, \"min_blocks\": 2}" "$S" "$T" "$U" "$V"
run '{"cluster": 2, "threads_per_row": 256, "threads": 256}' "$S" "$T" "$U" "$V"
run '{"cluster": 4, "threads_per_row": 256, "threads": 256, "unroll": 2, "min_blocks": 3}' "$S" "$T" "$U" "$V"
run "{$P, \"unroll\": 2, \"min_blocks\": 2}" "$S" "$T" "$U" "$V"
run '{"threads_per_row": 1024, "threads": 1024, "unroll": 2}' "$S" "$T" "$U" "$V"
run '{"threads_per_row": 1024, "threads": 1024, "unroll": 1}' "$S" "$T" "$U" "$V"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
