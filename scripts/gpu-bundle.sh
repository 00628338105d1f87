#!/usr/bin/env bash
# Development machine: builds the GPU-side binaries (tests, benchmarks,
# examples, the kiln tool) in Release and packs them, with
# libkiln_compiler.so (LLVM/MLIR inside) and the anchor scripts, into the
# ignored folder .device/ as one xz tarball. Carry `.device` to the GPU
# machine and run scripts/gpu-run.sh there (see docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${KILN_GPU_BUILD_DIR:-build-gpu}
bash scripts/setup.sh
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$BUILD" -j "${KILN_JOBS:-$(nproc)}"

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/kiln/bin" "$STAGE/kiln/lib" "$STAGE/kiln/anchors" "$STAGE/kiln/graphs"
for exe in tests/kiln_tests runtime/tests/kiln_runtime_tests facade/tests/kiln_facade_tests facade/tests/kiln_facade_workspace_tests tests/aot/kiln_aot_tests tests/interop/kiln_interop_tests compiler/kiln_compiler_tests \
           bench/bench_pointwise bench/bench_reduction bench/bench_backward bench/bench_matmul bench/bench_compile bench/bench_warm_start tools/kiln tools/kiln-tune \
           examples/lesson_00_graphs examples/lesson_01_bias_gelu examples/lesson_02_row_reductions \
           examples/lesson_03_tuning examples/lesson_04_linear examples/lesson_05_aot examples/lesson_06_cuda_graphs \
           examples/lesson_08_training_step; do
  if [ -f "$BUILD/$exe" ]; then cp "$BUILD/$exe" "$STAGE/kiln/bin/"; fi
done
cp "$BUILD"/compiler/libkiln_compiler.so* "$STAGE/kiln/lib/"
# Lesson 7's ahead-of-time library, which python/kiln_torch.py loads from PyTorch.
cp "$BUILD"/examples/libkiln_lesson07.so "$STAGE/kiln/lib/" 2>/dev/null || true
# kiln compiled at run time from other languages (kiln_torch.compile).
cp "$BUILD"/facade/libkiln_jit.so "$STAGE/kiln/lib/" 2>/dev/null || true
strip --strip-unneeded "$STAGE"/kiln/bin/* 2>/dev/null || true
cp examples/graphs/*.kiln examples/graphs/tune.manifest "$STAGE/kiln/graphs/" 2>/dev/null || true
# The anchors (PyTorch eager / torch.compile / Triton, and the raw floors)
# run in the same device call as kiln's benchmarks.
SHARED=${KILN_SHARED_DIR:-$ROOT/../shared}
cp "$SHARED/bench/anchors.py" "$SHARED/bench/floor.cu" bench/anchors_pointwise.py bench/anchors_reduction.py bench/anchors_backward.py bench/anchors_matmul.py bench/kiln_kernels.py \
   "$STAGE/kiln/anchors/"
git rev-parse --short=12 HEAD > "$STAGE/kiln/COMMIT" 2>/dev/null || echo unknown > "$STAGE/kiln/COMMIT"
git status --porcelain | grep -q . && echo "+dirty" >> "$STAGE/kiln/COMMIT" || true
mkdir -p .device
tar -C "$STAGE" -cf - kiln | xz -T0 -6 > .device/kiln-bundle.tar.xz
cp scripts/gpu-run.sh .device/
ls -la .device/
