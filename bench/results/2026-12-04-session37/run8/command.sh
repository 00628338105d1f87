#!/usr/bin/env bash
# Session 37 call 8 (bundle of 667a72f; python/ from the commit this script
# was committed with): the host cost of a kiln_torch call next to PyTorch
# eager and a bare ctypes call, the first kiln_torch beside the reworked
# one (bench/probes/torch_call_overhead.py) after call 7: outputs from
# new_empty, the device from torch._C._cuda_getDevice; then tests/torch and lesson 7
# with the reworked module.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
timeout 200 python3 bench/probes/torch_call_overhead.py $K/lib/libkiln_lesson07.so > $R/overhead.log 2>&1; echo "rc=$?"; cat $R/overhead.log
timeout 200 python3 tests/torch/test_kiln_torch.py $K/lib/libkiln_lesson07.so > $R/torch-tests.log 2>&1; echo "torch tests rc=$?"; grep -h "PASS\|FAIL\|passed" $R/torch-tests.log
timeout 200 python3 examples/lesson_07_pytorch.py $K/lib/libkiln_lesson07.so > $R/lesson7.log 2>&1; echo "lesson 7 rc=$?"; tail -6 $R/lesson7.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
