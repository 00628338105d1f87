#!/usr/bin/env bash
# Session 37 call 10 (bundle of the commit it prints): kiln compiled at run
# time inside a PyTorch process (kiln_torch.compile through libkiln_jit.so)
# -- tests/torch with both libraries, lesson 7, the host-cost probe.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export KILN_CACHE_DIR=/tmp/cache
timeout 300 python3 tests/torch/test_kiln_torch.py $K/lib/libkiln_lesson07.so $K/lib/libkiln_jit.so > $R/torch-tests.log 2>&1
echo "torch tests rc=$?"; tail -25 $R/torch-tests.log
timeout 120 python3 examples/lesson_07_pytorch.py $K/lib/libkiln_lesson07.so > $R/lesson7.log 2>&1; echo "lesson 7 rc=$?"; tail -6 $R/lesson7.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
