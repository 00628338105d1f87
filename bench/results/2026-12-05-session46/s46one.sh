#!/usr/bin/env bash
# Session 46, one call (device time short after refused starts): the
# attention block stored (0) and recomputed in the matmul's kernel (1) with
# torch.compile's block beside them; the row-softmax form's [gpu] test;
# memcheck on its first five cases; five random graphs whose softmax an
# sm_90 compile fuses, then fresh random graphs while time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
for r in 0 1; do
  F=$R/bench-rows$r.log
  KILN_BLOCK_ROW_SOFTMAX=$r KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 80 $K/bin/bench_matmul block > $F 2>&1; echo "bench rows=$r rc=$? $SECONDS s"; grep -v '^{' $F | grep -v mlp
done
timeout 60 python3 - > $R/anchors.log 2>&1 <<'PY'
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
PY
echo "anchors rc=$? $SECONDS s"; grep " us" $R/anchors.log
KILN_CACHE_DIR=$(mktemp -d) timeout 200 $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" --durations yes > $R/rows.log 2>&1; echo "rows rc=$? $SECONDS s"; grep -v "^  %" $R/rows.log | tail -25
KILN_ROW_SOFTMAX_CASES=5 KILN_CACHE_DIR=$(mktemp -d) timeout 50 compute-sanitizer --tool memcheck $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/san-memcheck.log 2>&1
echo "memcheck rc=$? $SECONDS s"; grep -E "ERROR SUMMARY|passed|failed" $R/san-memcheck.log | tail -3
for s in 47000906 47001731 47001961 47002094 47002242; do
  KILN_RANDOM_SEED=$s KILN_RANDOM_GRAPHS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 30 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$s.log 2>&1; echo "random $s rc=$?"; tail -2 $R/random-$s.log | head -1
done
left=$((420 - SECONDS))
if [ $left -gt 30 ]; then
  KILN_RANDOM_GRAPHS=100 KILN_CACHE_DIR=$(mktemp -d) timeout $left $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random.log 2>&1; echo "random rc=$? $SECONDS s"; grep -v "^  %" $R/random.log | tail -30
fi
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
