#!/usr/bin/env bash
# Session 46 call 3: racecheck and synccheck on the row-softmax form's first
# cases, the graphs with matmuls, then random graphs on the GPU (16-bit
# matmuls in the generator since 7472db5) while time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
for tool in racecheck synccheck; do
  KILN_ROW_SOFTMAX_CASES=5 KILN_CACHE_DIR=$(mktemp -d) timeout 45 compute-sanitizer --tool $tool $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $SECONDS s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $R/san-$tool.log | tail -3
done
KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "graphs with matmuls among other ops match the reference" > $R/graphs.log 2>&1; echo "graphs rc=$? $SECONDS s"; tail -2 $R/graphs.log | head -1
i=0
while [ $SECONDS -lt 140 ]; do
  seed=$((47200000 + 200 * i)); i=$((i+1))
  KILN_RANDOM_SEED=$seed KILN_RANDOM_GRAPHS=200 KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$seed.log 2>&1
  echo "random 200 from $seed rc=$? $SECONDS s: $(grep -E 'passed|failed' $R/random-$seed.log | tail -1)"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
