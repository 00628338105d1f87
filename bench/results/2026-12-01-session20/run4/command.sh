#!/usr/bin/env bash
# Session 20 call 4: the rows under 4.0 TB/s at 4096x32768 (softmax,
# layernorm bf16/f32), sums and cross_entropy: kiln-tune's candidates
# against the heuristic (whole graph), then bench_reduction with split rows
# (clusters of 2 x 512 or 4 x 256 at two blocks per SM) against the default.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
export KILN_CACHE=0
for f in .device/s20/*.graph; do
  n=$(basename $f .graph)
  timeout 60 "$K/bin/kiln-tune" tune $f --verbose --iters 20 -o $R/tune-$n.json > $R/tune-$n.log 2>&1; echo "$n rc=$?"
  grep -E "tuned now" $R/tune-$n.log | head -1
  grep -E "^\s+ok" $R/tune-$n.log | sort -k5 -n | head -3
done
echo "== A/B $SECONDS s"
CASES=("softmax(-1) [4096x32768" "layernorm [4096x32768")
i=0
for rc in '' '{"cluster":2,"min_blocks":2,"row_loop":1}' '{"cluster":2,"min_blocks":2,"row_loop":0}' '{"cluster":4,"min_blocks":2,"threads":256,"threads_per_row":256,"row_loop":1}'; do
  i=$((i+1)); echo "-- config $i: ${rc:-default}"
  KILN_ROW_CONFIG="$rc" timeout 100 $K/bin/bench_reduction "${CASES[@]}" > $R/ab-$i.log 2>&1; echo "rc=$?"
  grep -E "kiln 1 kernel" $R/ab-$i.log
  grep -E "spill" $R/ab-$i.log | grep -v " 0 bytes spill stores" | head -4
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
