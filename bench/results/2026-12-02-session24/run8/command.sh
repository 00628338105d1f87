#!/usr/bin/env bash
# Session 24 call 8 (bundle HEAD): layernorm and cross_entropy of a dynamic
# row length beside their static kernels (the variant rule was measured on
# softmax and rmsnorm only).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 120 $K/bin/bench_reduction "layernorm (dynamic N)" "cross_entropy (dynamic N)" "layernorm [32768x4096" "layernorm [4096x32768" "cross_entropy [8192x32768" > $R/bench.log 2>&1; echo "bench rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench.log | cut -c1-112
grep -h "schedule row_reduction, config" $R/bench.log | cut -c1-170
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
