#!/usr/bin/env bash
# Session 46: session 45's planned call (below), and in the bench call the
# random graphs on the GPU (16-bit matmuls new in their generator; ten
# seeds whose softmax an sm_90 compile fuses into the matmul, then fresh).
# Planned in session 45 (no device was lent): the row-softmax form of the
# Hopper matmul (a softmax over the product's rows in the matmul's kernel,
# CompileOptions::matmulRowSoftmax, off by default) on the GPU for the first
# time. Copy to .device/, build the bundle (scripts/gpu-bundle.sh), run with
# carry [".device"], as two calls: `bash .device/row-softmax.sh tests`
# (about 8 minutes: each config of the space compiles once) and
# `bash .device/row-softmax.sh bench` (about 4).
#  1. its [gpu] test (ragged shapes, batches, log_softmax, masked rows,
#     every cluster size and every config of its tuning space) and the
#     graphs with matmuls (both plans);
#  2. compute-sanitizer memcheck, racecheck and synccheck on its first cases;
#  3. the attention block with the product stored (0) and recomputed (1),
#     twice, then torch.compile's block in the same call.
# Prediction (H200): block about 20-29 us against 35.3 stored (session 44);
# the form's pass 2 is the scores kernel plus the exp (about 17-18 us), pass
# 1 adds the product and the exp without stores.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
if [ "${1:-tests}" = tests ]; then
KILN_CACHE_DIR=$(mktemp -d) timeout 330 $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" --durations yes > $R/rows.log 2>&1; echo "rows rc=$?"; grep -v "^  %" $R/rows.log | tail -25
KILN_CACHE_DIR=$(mktemp -d) timeout 100 $K/bin/kiln_tests "graphs with matmuls among other ops match the reference" > $R/graphs.log 2>&1; echo "graphs rc=$?"; tail -3 $R/graphs.log
for tool in memcheck racecheck synccheck; do
  KILN_ROW_SOFTMAX_CASES=5 KILN_CACHE_DIR=$(mktemp -d) timeout 50 compute-sanitizer --tool $tool $K/bin/kiln_tests "matmul: a softmax over the product's rows in the Hopper kernel matches the reference" > $R/san-$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $R/san-$tool.log | tail -3
done
echo "== tests done $SECONDS s"
else
for r in 0 1 0 1; do
  F=$R/bench-rows$r-$SECONDS.log
  KILN_BLOCK_ROW_SOFTMAX=$r KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 80 $K/bin/bench_matmul block > $F 2>&1; echo "bench rows=$r rc=$?"; grep -v '^{' $F | grep -v mlp
done
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
PY
echo "anchors rc=$?"; grep " us" $R/anchors.log
fi
if [ "${1:-tests}" = bench ]; then
for s in 47000906 47001731 47001961 47002094 47002242 47003198 47003899 47004945 47005028 47005120; do
  KILN_RANDOM_SEED=$s KILN_RANDOM_GRAPHS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 40 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$s.log 2>&1; echo "random $s rc=$?"; tail -2 $R/random-$s.log | head -1
done
KILN_RANDOM_GRAPHS=${KILN_RANDOM_GRAPHS:-150} KILN_CACHE_DIR=$(mktemp -d) timeout 200 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random.log 2>&1; echo "random rc=$?"; grep -v "^  %" $R/random.log | tail -30
fi
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
