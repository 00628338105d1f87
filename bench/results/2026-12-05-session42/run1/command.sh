#!/usr/bin/env bash
# Session 42 call 1 (was session 41 call 3, not run then) (bundle of the commit it prints): where the attention
# block's time goes (call 2: kiln 58.8 us, torch.compile 49.1): its
# kernels alone (bench_matmul block with KILN_BLOCK_PARTS: the scaled
# scores with T dynamic and static, the softmax over them, the block with T
# static) next to cuBLAS's q @ k.T and torch.compile's softmax alone.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 200 $K/bin/bench_matmul block > $R/bench-parts.log 2>&1; echo "bench rc=$?"; grep -v '^{' $R/bench-parts.log
timeout 150 python3 - > $R/anchors-parts.log 2>&1 <<'PY'
import math, torch
from triton.testing import do_bench
T = 4096
q = torch.randn(T, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(T, 128, device="cuda", dtype=torch.bfloat16)
s = torch.randn(T, T, device="cuda", dtype=torch.bfloat16)
scale = 1 / math.sqrt(128)
def b(f): return do_bench(f, warmup=25, rep=200, return_mode="median") * 1e3
print(f"part scores q @ k.T              cublas        {b(lambda: q @ k.t()):9.1f} us")
print(f"part scores q @ k.T * scale      eager         {b(lambda: q @ k.t() * scale):9.1f} us")
sm = torch.compile(lambda s: torch.softmax(s, dim=-1))
sm(s)
print(f"part softmax 4096x4096 bf16      torch.compile {b(lambda: sm(s)):9.1f} us")
print(f"part softmax 4096x4096 bf16      eager         {b(lambda: torch.softmax(s, dim=-1)):9.1f} us")
PY
echo "anchors rc=$?"; cat $R/anchors-parts.log | grep " us"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
