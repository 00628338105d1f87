#!/usr/bin/env bash
# Session 18 call 6: how fast are normalizations over a non-last axis today?
# softmax(x, 0) f32 8192x1024 and a layernorm over axis 0 (bf16 8192x4096):
# kiln-tune's candidates (the heuristic's first, L2 flushed, checked) and
# eager / torch.compile under do_bench.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
for gname in smc lnc; do
  KILN_CACHE=0 timeout 150 "$K/bin/kiln-tune" tune .device/$gname.graph --verbose --iters 20 -o $R/tune-$gname.json > $R/tune-$gname.log 2>&1; echo "$gname rc=$?"
  grep -iE "heuristic|best|kernel" $R/tune-$gname.log | head -12
done
timeout 150 python3 .device/cols.py 2>&1 | tee $R/torch.log | grep -v Warning
cd "$OUT" && tar czf r.tgz r && rm -rf r
