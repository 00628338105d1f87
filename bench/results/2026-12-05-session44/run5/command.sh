#!/usr/bin/env bash
# Session 44 call 5 (same warm H200 as call 4, bundle of the commit it
# prints): the attention block next to eager and torch.compile in one call.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/bench_matmul block > $R/bench.log 2>&1; echo "bench rc=$?"; grep -v '^{' $R/bench.log
timeout 80 python3 - > $R/anchors.log 2>&1 <<'PY'
import math, torch
from triton.testing import do_bench
T = 4096
q = torch.randn(T, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(T, 128, device="cuda", dtype=torch.bfloat16)
scale = 1 / math.sqrt(128)
def attention_scores(q, k): return torch.softmax(q @ k.t() * scale, dim=-1)
def b(f): return do_bench(f, warmup=25, rep=200, return_mode="median") * 1e3
print(f"block attention_scores T4096 d128  eager         {b(lambda: attention_scores(q, k)):9.1f} us")
c = torch.compile(attention_scores); c(q, k)
print(f"block attention_scores T4096 d128  torch.compile {b(lambda: c(q, k)):9.1f} us")
print(f"part scores q @ k.T                cublas        {b(lambda: q @ k.t()):9.1f} us")
PY
echo "anchors rc=$?"; grep " us" $R/anchors.log
cd "$OUT" && tar czf r.tgz r && rm -rf r
