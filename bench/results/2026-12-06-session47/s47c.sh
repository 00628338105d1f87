#!/usr/bin/env bash
# Session 47 call 3: the row-softmax form's whole [gpu] test with its exit
# barrier (b1dec3a; call 2's run was cut by its 90 s timeout after 84
# assertions passed), then random graphs while time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
KILN_CACHE_DIR=$(mktemp -d) timeout 200 $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/rowform.log 2>&1
echo "row form rc=$? $SECONDS s"; tail -3 $R/rowform.log
i=0
while [ $SECONDS -lt 250 ]; do
  seed=$((47610000 + 200 * i)); i=$((i+1))
  KILN_RANDOM_SEED=$seed KILN_RANDOM_GRAPHS=200 KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$seed.log 2>&1
  echo "random 200 from $seed rc=$? $SECONDS s: $(grep -E 'passed|failed' $R/random-$seed.log | tail -1)"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
