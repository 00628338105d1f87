#!/usr/bin/env bash
# Session 33 call 2: why the held dynamic rows ran slower than the static
# held kernels at the same threads and blocks per SM (call 1): the same
# configs with the row's loads unhinted (KILN_X_HELD_NOEVICT) and as plain
# invariant loads of a clamped column (KILN_X_HELD_PLAINLOADS), two rounds;
# then the GPU tests of dynamic rows (the held override among them).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
i=0
run() { i=$((i+1)); local envs="$1"; local cfg="$2"; shift 2
  [ $SECONDS -gt 400 ] && return
  env $envs ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] $envs cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-125; }
SF32="softmax(-1) (dynamic N) [4096x32768 float32]"; RB16="rmsnorm (dynamic N) [8192x16384 bfloat16]"
C1='{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 16, "unroll": 4, "evict": 1, "l2_prefetch": 48}'
C2='{"threads_per_row": 512, "threads": 512, "persistent": 1, "one_step": 4, "unroll": 4, "evict": 1, "l2_prefetch": 192}'
for round in 1 2; do
for e in "KILN_X_NONE=1" "KILN_X_HELD_NOEVICT=1" "KILN_X_HELD_PLAINLOADS=1" "KILN_X_HELD_NOEVICT=1 KILN_X_HELD_PLAINLOADS=1"; do
  run "$e" "$C1" "$SF32"; run "$e" "$C2" "$RB16"
done
run "KILN_X_NONE=1" "" "softmax(-1) [4096x32768 float32]" "rmsnorm [8192x16384 bfloat16]"
done
echo "=== tests ($SECONDS s)"
timeout 170 stdbuf -oL $K/bin/kiln_tests -d yes "rows of a dynamic length match*,long dynamic rows launch*" > "$R/tests.log" 2>&1; echo "rc=$?"
grep -E "^[0-9.]+ s:|test cases|FAILED" "$R/tests.log" | tail -8
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
