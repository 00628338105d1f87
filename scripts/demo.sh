#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
"${KILN_BUILD_DIR:-build}"/examples/lesson_00_graphs
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_01_bias_gelu
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_02_row_reductions
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_03_tuning "${KILN_BUILD_DIR:-build}/lesson3-ship"
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_04_linear
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_05_aot
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_06_cuda_graphs
echo
"${KILN_BUILD_DIR:-build}"/examples/lesson_08_training_step
echo
# Lesson 7 calls kiln from PyTorch: it needs torch (and a GPU) in python3.
if python3 -c "import torch" 2>/dev/null; then
  python3 examples/lesson_07_pytorch.py "${KILN_BUILD_DIR:-build}"/examples/libkiln_lesson07.so
else
  echo "lesson 7 (kiln from PyTorch, examples/lesson_07_pytorch.py) needs torch in python3: not installed here"
fi
