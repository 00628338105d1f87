#!/usr/bin/env bash
# Session 37 call 5 (bundle of the commit it prints): kiln from PyTorch --
# tests/torch/test_kiln_torch.py and lesson 7 on the bundle's
# libkiln_lesson07.so -- and kiln_interop_tests' workspace-capture case
# (renamed: call 4's name held a comma, so Catch ran nothing).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
B timeout 120 $K/bin/kiln_interop_tests "a workspace cannot grow inside a capture; a captured one outlives a later growth" > $R/interop-4.log 2>&1
echo "interop 4 rc=$?"; tail -2 $R/interop-4.log | head -1
echo "=== torch tests ($SECONDS s)"
timeout 200 python3 tests/torch/test_kiln_torch.py $K/lib/libkiln_lesson07.so > $R/torch-tests.log 2>&1; echo "rc=$?"; cat $R/torch-tests.log | tail -40
echo "=== lesson 7 ($SECONDS s)"
timeout 200 python3 examples/lesson_07_pytorch.py $K/lib/libkiln_lesson07.so > $R/lesson7.log 2>&1; echo "rc=$?"; tail -12 $R/lesson7.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
