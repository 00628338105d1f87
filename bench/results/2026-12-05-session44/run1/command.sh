#!/usr/bin/env bash
# Session 44 call 1 (bundle of the commit it prints; old bundle 667125f):
# every [gpu] test at the commit that makes a staging buffer per 64-column
# chunk the heuristic's for a short K (7b7391e; the planner's cycle fix
# 3b3bdd1 is in it), then the attention and MLP blocks with their parts,
# new heuristic against the old (one staging buffer), next to the anchors'
# blocks in the same call.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
KILN_STAGES=tests KILN_PACK=1 KILN_DEADLINE_S=340 KILN_TIMEOUT_TESTS=330 bash scripts/gpu-run.sh "$OUT/t"
echo "tests rc=$? at $SECONDS s"
for b in kiln old; do
  W=/tmp/$b-bundle; [ $b = old ] && { rm -rf $W && mkdir -p $W && xz -dc .device/$b-bundle.tar.xz | tar -C $W -xf -; }
  echo "$b bundle $(cat $W/kiln/COMMIT)"
  LD_LIBRARY_PATH=$W/kiln/lib KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 70 $W/kiln/bin/bench_matmul block > $R/bench-$b.log 2>&1; echo "bench $b rc=$?"; grep -v '^{' $R/bench-$b.log
done
K=/tmp/kiln-bundle/kiln
(cd $K/anchors && timeout 130 python3 anchors_matmul.py) > $R/anchors-matmul.log 2>&1; echo "anchors rc=$?"; grep -v Warning $R/anchors-matmul.log | grep "block" | tail -8
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
