#!/usr/bin/env bash
# Session 44 call 4: the Hopper matmul's tile walk in 32-bit arithmetic
# (bundle of the commit it prints) against 7b7391e (old bundle): the matmul
# [gpu] tests (reference shapes with batches, graphs with matmuls, clusters
# of 2, every config of the space, the compute-sanitizer shapes) and 200
# random graphs, then the attention and MLP blocks with their parts, new
# and old, in the same call. Prediction: the scores with T dynamic (64-bit
# divisions by runtime tile counts between tiles) 18.8 -> about 18.0 us,
# T static little changed.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in kiln old; do
  W=/tmp/$b-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/$b-bundle.tar.xz | tar -C $W -xf -
  echo "$b bundle $(cat $W/kiln/COMMIT)"
done
K=/tmp/kiln-bundle/kiln
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
( KILN_CACHE_DIR=$(mktemp -d) KILN_RANDOM_SEED=44700000 KILN_RANDOM_GRAPHS=200 timeout 200 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random.log 2>&1; echo "random rc=$?" >> $R/random.log ) &
i=0
for t in "matmul matches the reference*" "graphs with matmuls among other ops match the reference" "matmul: small shapes for compute-sanitizer" "matmul: every config of the Hopper kernel*" "matmul: clusters of 2*" "matmul epilogues match the reference"; do
  i=$((i + 1))
  ( KILN_CACHE_DIR=$(mktemp -d) timeout 230 $K/bin/kiln_tests "$t" --durations yes > $R/matmul-$i.log 2>&1; echo "matmul test $i rc=$?" >> $R/matmul-$i.log ) &
done
wait; for f in $R/random.log $R/matmul-*.log; do grep -v "^  %" $f | grep -E " s: |rc=|passed|failed" | tail -3; done
echo "== tests done $SECONDS s"
for b in kiln old kiln; do
  KB=/tmp/$b-bundle/kiln
  F=$R/bench-$b-$SECONDS.log
  LD_LIBRARY_PATH=$KB/lib KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 70 $KB/bin/bench_matmul block > $F 2>&1; echo "bench $b rc=$?"; grep -v '^{' $F
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
