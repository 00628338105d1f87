#!/usr/bin/env bash
# Session 26 call 3: A = bundle e9d37b0 (before), B = bundle 85d0677 (the
# looped-row occupancy rebuild, min_blocks up to 64 KB in flight per SM;
# tuner final rounds rotated). Every reduction benchmark case with B, the
# changed cases A/B/A/B, then the GPU tuning test with B.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
for v in A B; do
  W=/tmp/kiln-$v; rm -rf $W && mkdir -p $W
  f=.device/kiln-bundle.tar.xz; [ $v = A ] && f=.device/kiln-bundle-e9d37b0.tar.xz
  xz -dc $f | tar -C $W -xf -; echo "$v: $(cat $W/kiln/COMMIT)"
done
cd $R
runb() { local v=$1; shift; env LD_LIBRARY_PATH=/tmp/kiln-$v/kiln/lib KILN_CACHE_DIR=/tmp/cache-$v timeout 200 /tmp/kiln-$v/kiln/bin/bench_reduction "$@"; }
show() { grep -h "kiln [0-9] kernel\|FAIL" "$1" | sed 's/ kiln [0-9] kernel(s)//; s/(p95 .*) //' | cut -c1-80; }
runb B > allB.log 2>&1; echo "all B rc=$? $SECONDS s"; show allB.log
CH=("layernorm [32768x4096 bfloat16" "layernorm [16384x8192 bfloat16" "layernorm [8192x16384 bfloat16" "rmsnorm [16384x8192 bfloat16" "layernorm (dynamic N)" "rmsnorm (dynamic N) [32768x4096 float32" "rmsnorm (dynamic N) [4096x32768 float32" "rmsnorm (dynamic N) [16384x8192 float32" "rmsnorm (dynamic N) [8192x16384 float32" "rmsnorm (dynamic N) [1024x262144 float32")
for i in 1 2; do
  for v in A B; do runb $v "${CH[@]}" > ch$v$i.log 2>&1; echo "== $v round $i rc=$? $SECONDS s"; show ch$v$i.log; done
done
W=/tmp/kiln-B/kiln
(cd $W/bin 2>/dev/null; ls) | head -20
LD_LIBRARY_PATH=$W/lib KILN_CACHE_DIR=/tmp/cache-B timeout 150 $W/bin/kiln_tests "tuning: softmax and gelu*" > tuning.log 2>&1; echo "tuning test rc=$? $SECONDS s"
grep -h "^tuning \|second process\|test cases\|FAILED" tuning.log | cut -c1-400
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
