#!/usr/bin/env bash
# Session 20 call 1: 32-bit shared-memory pointers (LLVM -nvptx-short-ptr)
# and the equal-count Welford merge in the cluster exchange, A/B against
# the default on every reduction benchmark (kiln only), plus kiln-tune's
# heuristic times for log_softmax / layernorm-no-affine 1024x262144.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
export KILN_CACHE=0
for mode in def exp; do
  if [ $mode = exp ]; then export KILN_LLVM_ARGS=-nvptx-short-ptr KILN_EXP_EQC=1; fi
  echo "== $mode bench $SECONDS s"
  timeout 200 $K/bin/bench_reduction > $R/bench-$mode.log 2>&1; echo "rc=$?"
  grep -E "TB/s|us/call" $R/bench-$mode.log | grep -v JSON | grep kiln | head -40
  for g in lsm lnn; do
    timeout 60 "$K/bin/kiln-tune" tune .device/$g.graph --verbose --iters 20 -o $R/tune-$g-$mode.json > $R/tune-$g-$mode.log 2>&1; echo "$g rc=$?"
    grep -iE "heuristic" $R/tune-$g-$mode.log | head -3
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
