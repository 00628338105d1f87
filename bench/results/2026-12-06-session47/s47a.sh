#!/usr/bin/env bash
# Session 47 call 1: the ring probe (bench/probes/ring_rows.cu, built on the
# development machine) next to kiln's held cluster rows at 1024x262144 f32,
# then session 46's unrun checks (s46d.sh): racecheck and synccheck on the
# row-softmax form, the graphs with matmuls, random graphs while time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=$(mktemp -d)
timeout 60 $K/bin/bench_reduction 262144 > $R/kiln-262144-a.log 2>&1; echo "kiln a rc=$? $SECONDS s"
grep -E "TB/s|roof" $R/kiln-262144-a.log | head -12
timeout 120 .device/ring_rows > $R/ring.log 2>&1; echo "ring rc=$? $SECONDS s"; cat $R/ring.log
timeout 60 $K/bin/bench_reduction 262144 > $R/kiln-262144-b.log 2>&1; echo "kiln b rc=$? $SECONDS s"
grep -E "TB/s|roof" $R/kiln-262144-b.log | head -12
for tool in racecheck synccheck; do
  KILN_ROW_SOFTMAX_CASES=5 KILN_CACHE_DIR=$(mktemp -d) timeout 45 compute-sanitizer --tool $tool $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $SECONDS s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $R/san-$tool.log | tail -3
done
KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "graphs with matmuls among other ops match the reference" > $R/graphs.log 2>&1; echo "graphs rc=$? $SECONDS s"; tail -2 $R/graphs.log | head -1
i=0
while [ $SECONDS -lt 420 ]; do
  seed=$((47200000 + 200 * i)); i=$((i+1))
  KILN_RANDOM_SEED=$seed KILN_RANDOM_GRAPHS=200 KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$seed.log 2>&1
  echo "random 200 from $seed rc=$? $SECONDS s: $(grep -E 'passed|failed' $R/random-$seed.log | tail -1)"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
