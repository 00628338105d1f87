#!/usr/bin/env bash
# Session 48 call 7 (any GPU): the planner's empty values (emptyValuesAsZeros)
# on the GPU: the new [gpu] test, the graphs with matmuls, and random graphs
# from a fresh seed; on an H200 also the idle-SM probe first.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
if [[ "$GPU" == *H200* ]]; then
  timeout 40 .device/idle_sms > $R/idle_sms.log 2>&1; echo "idle_sms rc=$? $SECONDS s"; cat $R/idle_sms.log
fi
KILN_CACHE_DIR=$(mktemp -d) timeout 30 $K/bin/kiln_tests "graphs with values of no elements match the reference on the GPU" > $R/empty.log 2>&1
echo "empty values rc=$? $SECONDS s"; tail -4 $R/empty.log
KILN_CACHE_DIR=$(mktemp -d) timeout 40 $K/bin/kiln_tests "graphs with matmuls among other ops match the reference" > $R/graphs.log 2>&1
echo "graphs rc=$? $SECONDS s"; tail -2 $R/graphs.log | head -1
i=0
while [ $SECONDS -lt 110 ]; do
  seed=$((48900000 + 200 * i)); i=$((i+1))
  KILN_RANDOM_SEED=$seed KILN_RANDOM_GRAPHS=200 KILN_CACHE_DIR=$(mktemp -d) timeout 40 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$seed.log 2>&1
  echo "random 200 from $seed rc=$? $SECONDS s: $(grep -E 'passed|failed' $R/random-$seed.log | tail -1)"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
