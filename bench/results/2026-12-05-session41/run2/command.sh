#!/usr/bin/env bash
# Session 41 call 2 (bundle of the commit it prints): blocks with matmuls
# among other ops (bench_matmul block: attention scores, a pre-norm MLP
# block) next to eager and torch.compile (anchors_matmul.py) in the same
# call; before them the [gpu] test of graphs with matmuls among other ops
# again (call 1 found a launch of a row kernel's scalar entry asking for
# the Hopper matmul's, which has none) and the ahead-of-time tests (with
# attention_scores, a staged plan, among them); then more random graphs on the GPU
# (300 from seed 41410000); the kiln_torch tests (call 1: the CUDA-graph
# case's reference was one bf16 rounding off).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
KILN_CACHE_DIR=$(mktemp -d) timeout 150 $K/bin/kiln_tests "graphs with matmuls among other ops match the reference" > $R/matmul-graphs.log 2>&1; echo "tests rc=$?"
grep -v "^  %" $R/matmul-graphs.log | tail -30
timeout 120 $K/bin/kiln_aot_tests "[gpu]" > $R/aot.log 2>&1; echo "aot tests rc=$?"; tail -4 $R/aot.log
KILN_CACHE_DIR=$(mktemp -d) timeout 150 $K/bin/bench_matmul block > $R/bench-blocks.log 2>&1; echo "bench rc=$?"; grep -v '^{' $R/bench-blocks.log
(cd $K/anchors && timeout 200 python3 anchors_matmul.py) > $R/anchors-matmul.log 2>&1; echo "anchors rc=$?"; grep -v Warning $R/anchors-matmul.log | grep "us\|Error\|error" | tail -12
echo "== bench done $SECONDS s"
left=$((520 - SECONDS))
KILN_RANDOM_SEED=41410000 KILN_RANDOM_GRAPHS=300 KILN_CACHE_DIR=$(mktemp -d) timeout $left $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random.log 2>&1; echo "random rc=$?"
grep -v "^  %" $R/random.log | tail -40
timeout 120 python3 tests/torch/test_kiln_torch.py $K/lib/libkiln_lesson07.so $K/lib/libkiln_jit.so > $R/torch-tests.log 2>&1; echo "torch tests rc=$?"; grep -E "PASS|FAIL|passed" $R/torch-tests.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
