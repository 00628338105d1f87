#!/usr/bin/env bash
# Session 48 call 6: only on an H200 (every call so far got an H100): the
# idle-SM probe and kiln's 1024x262144 rows (bench_reduction alone). On an
# H100 it stops at once.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
[[ "$GPU" == *H200* ]] || { echo "not an H200: nothing run"; exit 0; }
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=$(mktemp -d)
timeout 60 .device/idle_sms > $R/idle_sms.log 2>&1; echo "idle_sms rc=$? $SECONDS s"; cat $R/idle_sms.log
timeout 60 $K/bin/bench_reduction 262144 > $R/kiln-262144.log 2>&1; echo "kiln rc=$? $SECONDS s"
grep -E "TB/s|roof" $R/kiln-262144.log | head -12
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
