#!/usr/bin/env bash
# Session 21 call 5: bench_pointwise variants (now with 8-byte vectors at
# 128/256/512 threads) timed next to torch.compile in rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
mkdir -p $R/kv
KILN_EXPORT_KERNELS=$R/kv timeout 150 $K/bin/bench_pointwise variants > $R/bench-variants.log 2>&1; echo "variants rc=$? $SECONDS s"
(cd $K/anchors && PYTHONUNBUFFERED=1 KILN_KERNELS=$R/kv timeout 300 python3 anchors_pointwise.py variants) 2>&1 | grep -v Warning > $R/anchors-variants.log; echo "anchors rc=$? $SECONDS s"
rm -f $R/kv/*.cubin
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
