#!/usr/bin/env bash
# Session 44 call 3 (bundle of the commit it prints, 7b7391e): the random
# graphs on the GPU at scale (6 processes x 500 graphs from fresh seeds,
# each against the reference), and compute-sanitizer memcheck on the
# matmul's small shapes (the heuristic's staging buffers per chunk now take
# the dynamic-N cases) and on 30 random graphs.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
T="random graphs match the reference on the GPU"
( KILN_CACHE_DIR=$(mktemp -d) timeout 400 compute-sanitizer --tool memcheck --leak-check full --print-limit 20 $K/bin/kiln_tests "matmul: small shapes for compute-sanitizer" > $R/memcheck-matmul.log 2>&1; echo "memcheck matmul rc=$?" >> $R/memcheck-matmul.log ) &
( KILN_CACHE_DIR=$(mktemp -d) KILN_RANDOM_SEED=44600000 KILN_RANDOM_GRAPHS=30 timeout 400 compute-sanitizer --tool memcheck --print-limit 20 $K/bin/kiln_tests "$T" > $R/memcheck-random.log 2>&1; echo "memcheck random rc=$?" >> $R/memcheck-random.log ) &
for i in 0 1 2 3 4 5; do
  ( KILN_CACHE_DIR=$(mktemp -d) KILN_RANDOM_SEED=$((44500000 + i * 10000)) KILN_RANDOM_GRAPHS=500 timeout 400 $K/bin/kiln_tests "$T" > $R/random-$i.log 2>&1; echo "random $i rc=$?" >> $R/random-$i.log ) &
done
wait
for f in $R/*.log; do echo "== $(basename $f)"; grep -v "^  " $f | tail -6; done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
