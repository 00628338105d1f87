#!/usr/bin/env bash
# Session 28 call 2: pointwise stores with an L2 priority (config
# store_evict 1 = evict_first, 2 = evict_last) next to the heuristic, Triton's
# grid (unroll 2) and torch.compile in rounds (anchors_pointwise.py
# variants), every case at every shape.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
mkdir -p "$R/kv"
env KILN_EXPORT_KERNELS="$R/kv" timeout 200 $K/bin/bench_pointwise variants > "$R/bench-variants.log" 2>&1
grep -c " ok " "$R/bench-variants.log"; grep "WRONG" "$R/bench-variants.log"
(cd $K/anchors && env PYTHONUNBUFFERED=1 KILN_KERNELS="$R/kv" timeout 300 python3 anchors_pointwise.py variants) 2>&1 | grep -v Warning > "$R/anchors-variants.log"
grep "TB/s" "$R/anchors-variants.log" | sed 's/  */ /g'
rm -rf "$R/kv"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
