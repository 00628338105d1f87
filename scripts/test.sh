#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with CTest.
# GPU tests ([gpu]) are reported as skipped on a machine without a driver.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${KILN_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
