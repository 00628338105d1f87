#!/usr/bin/env bash
# Session 26 call 4: A = bundle e9d37b0 (session start), B = bundle 751372a
# (occupancy rebuild with its limits; dynamic 512-thread rows split at 64 KB;
# tuner rounds rotated). Every [gpu] test with B, then the changed cases
# A, B.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=380 KILN_DEADLINE_S=385 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed" $R/t/run.log | head -20
grep -rh "^tuning " $R/t | cut -c1-300
W=/tmp/kiln-A; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle-e9d37b0.tar.xz | tar -C $W -xf -
ln -sfn /tmp/kiln-bundle /tmp/kiln-B
echo "A: $(cat /tmp/kiln-A/kiln/COMMIT) B: $(cat /tmp/kiln-B/kiln/COMMIT)"
cd $R
runb() { local v=$1; shift; env LD_LIBRARY_PATH=/tmp/kiln-$v/kiln/lib KILN_CACHE_DIR=/tmp/cache-$v timeout 100 /tmp/kiln-$v/kiln/bin/bench_reduction "$@"; }
show() { grep -h "kiln [0-9] kernel\|FAIL" "$1" | sed 's/ kiln [0-9] kernel(s)//; s/(p95 .*) //' | cut -c1-80; }
CH=("layernorm [32768x4096 bfloat16" "layernorm [16384x8192 bfloat16" "layernorm [8192x16384 bfloat16" "rmsnorm [16384x8192 bfloat16" "layernorm (dynamic N)" "rmsnorm (dynamic N)" "softmax(-1) (dynamic N) [8192x16384" "softmax(-1) (dynamic N) [4096x32768")
for v in A B; do runb $v "${CH[@]}" > ch$v.log 2>&1; echo "== $v rc=$? $SECONDS s"; show ch$v.log; done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
