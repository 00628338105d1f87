#!/usr/bin/env bash
# Session 31 call 3: (a) one-step entries in looped clusters as configs
# (dynamic long rows, each block's part held in one step); (b) the GPU tests
# of dynamic rows (the looped-cluster config test now with one-step entries,
# the heuristic's new looped clusters, variants, both entries); (c) every
# reduction benchmark next to the reduction anchors (the heuristic's new
# looped clusters for rows past 256 KB, layernorm bf16 dynamic 32768 at
# unroll 2 and min_blocks 2).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
L="softmax(-1) (dynamic N) [1024x262144 float32]"; M="rmsnorm (dynamic N) [1024x262144 float32]"
U="softmax(-1) (dynamic N) [4096x32768 float32]"; V="rmsnorm (dynamic N) [4096x32768 float32]"
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  env LD_LIBRARY_PATH=$K/lib ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 60 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-130; grep -h "config {" "$R/bench-$i.log" | cut -c30-230; }
run '{"cluster": 16, "threads_per_row": 1024, "threads": 1024, "one_step": 4}' "$L" "$M"
run '{"cluster": 2, "threads_per_row": 1024, "threads": 1024, "one_step": 4}' "$U" "$V"
echo "=== tests ($SECONDS s)"
LD_LIBRARY_PATH=$K/lib timeout 240 stdbuf -oL $K/bin/kiln_tests -d yes "rows of a dynamic length*,long dynamic rows*,a dynamic row longer than the row schedule counts*" > "$R/tests.log" 2>&1; echo "rc=$?"
grep -E "passed|failed|FAILED|SKIPPED" "$R/tests.log" | tail -5
echo "=== benchmarks ($SECONDS s)"
KILN_STAGES="bench" KILN_BENCHES="reduction" KILN_TIMEOUT_BENCH=150 KILN_DEADLINE_S=$((585 - SECONDS)) bash scripts/gpu-run.sh "$R/b"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
