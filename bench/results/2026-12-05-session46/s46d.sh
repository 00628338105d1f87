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
left=$((270 - SECONDS))
KILN_RANDOM_SEED=47200000 KILN_RANDOM_GRAPHS=3000 KILN_CACHE_DIR=$(mktemp -d) timeout $left $K/bin/kiln_tests "random graphs match the reference on the GPU" --durations yes > $R/random.log 2>&1; echo "random rc=$? $SECONDS s"; grep -v "^  %" $R/random.log | grep -v "^\s*$" | tail -30
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
