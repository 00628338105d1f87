#!/usr/bin/env bash
# Session 21 call 2 (bundle 7931dc9): layernorm f32 1024x262144 and 4096x32768
# against their tuning spaces (kiln-tune), and clusters of 16 at one block
# per SM (whole row configs, weights and bias resident) beside the heuristic.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
export KILN_CACHE=0
for g in ln262k ln32k; do
  timeout 150 $K/bin/kiln-tune tune .device/$g.graph --verbose --iters 20 -o $R/$g.json > $R/tune-$g.log 2>&1; echo "tune $g rc=$? $SECONDS s"
done
B="$K/bin/bench_reduction"
C='{"threads_per_row": 512, "threads": 512, "vector": 4, "persistent": 1, "unroll": 4'
for cfg in "" "$C, \"cluster\": 16, \"row_loop\": 1}" "$C, \"cluster\": 16, \"row_loop\": 1, \"min_blocks\": 2}" \
           "{\"threads_per_row\": 1024, \"threads\": 1024, \"vector\": 4, \"persistent\": 1, \"unroll\": 4, \"cluster\": 16, \"row_loop\": 1}" \
           "$C, \"cluster\": 8, \"row_loop\": 1}" ""; do
  echo "== KILN_ROW_CONFIG='$cfg'" >> $R/ab.log
  KILN_ROW_CONFIG="$cfg" timeout 60 $B "layernorm [1024x262144" >> $R/ab.log 2>&1; echo "ab rc=$? $SECONDS s"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
