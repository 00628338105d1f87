#!/usr/bin/env bash
# Session 32 call 1 (the session's only one: 880 s of device time were
# left): every [gpu] test at session 31's kernels (the heuristic's looped
# clusters for long dynamic rows, one-step entries in looped clusters, the
# unroll-halving occupancy rebuild), then every reduction benchmark at this
# commit's heuristic (no anchors: static kernels are unchanged since
# session 30's side-by-side run), then one-step cluster configs beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== tests ($SECONDS s)"
KILN_STAGES="tests" KILN_TIMEOUT_TESTS=380 KILN_DEADLINE_S=390 bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
grep -h "test cases\|FAILED\|failed" $R/t/run.log | head -20
(cd "$OUT" && tar czf t.tgz r/t && rm -rf r/t)
echo "=== benchmarks ($SECONDS s)"
KILN_STAGES="bench" KILN_BENCHES="reduction" KILN_TIMEOUT_BENCH=130 KILN_DEADLINE_S=$((540 - SECONDS)) bash scripts/gpu-run.sh "$R/b" > $R/bench.log 2>&1; echo "bench rc=$? $SECONDS s"
grep -h "dynamic N" $R/b/bench-reduction.log | grep "TB/s" | cut -c1-130
L="softmax(-1) (dynamic N) [1024x262144 float32]"; M="rmsnorm (dynamic N) [1024x262144 float32]"
i=0
run() { i=$((i+1)); local cfg="$1"; shift
  [ $SECONDS -gt 535 ] && return
  env LD_LIBRARY_PATH=$K/lib ${cfg:+KILN_ROW_CONFIG="$cfg"} KILN_CACHE_DIR=/tmp/cache-$i timeout 30 $K/bin/bench_reduction "$@" > "$R/bench-$i.log" 2>&1
  echo "== [$i] cfg=${cfg:-heuristic} rc=$? $SECONDS s"
  grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-130; grep -h "config {" "$R/bench-$i.log" | cut -c30-230; }
run '{"cluster": 16, "threads_per_row": 1024, "threads": 1024, "one_step": 4}' "$L" "$M"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
