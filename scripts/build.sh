#!/usr/bin/env bash
# Configures and builds kiln in ./build (or $KILN_BUILD_DIR). Extra
# arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}
JOBS=${KILN_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
