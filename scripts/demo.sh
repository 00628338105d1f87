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
