#!/usr/bin/env bash
# Session 18 call 1 (9233b88): lanes in the column form.
# 1) GPU tests of column reductions (lanes test, column tests, expression splits);
# 2) A/B: sum(0), sum(r*x,0) f32/bf16 32768x4096: heuristic (lanes) vs lanes 1 and variants, twice;
# 3) anchors for the same cases (torch.compile) in this call;
# 4) resource reports on this machine: kiln compile --json with KILN_DUMP=cubin-log.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
echo "== tests $SECONDS s"
( cd $R && timeout 200 "$K/bin/kiln_tests" "column reductions whose threads own several adjacent rows (lanes) match the reference" --durations yes > tests-lanes.log 2>&1; echo "lanes rc=$?" ) &
( cd $R && timeout 200 "$K/bin/kiln_tests" "column reductions (split into parts or not) match the reference" > tests-columns.log 2>&1; echo "columns rc=$?";
  timeout 100 "$K/bin/kiln_tests" "split reductions of elementwise expressions match the reference" > tests-expr.log 2>&1; echo "expr rc=$?" ) &
wait
tail -3 $R/tests-*.log
echo "== resource reports $SECONDS s"
cat > /tmp/col.graph <<'G'
kiln.graph v1
%0 = input "x" : bf16[32768, 4096]
%1 = sum %0 {axes = [0], keepdim = false} : bf16[4096]
output "y" = %1
G
KILN_CACHE=0 KILN_DUMP=cubin-log timeout 60 "$K/bin/kiln" compile /tmp/col.graph --json > $R/compile.json 2> $R/cubin-log.txt; echo "rc=$?"
head -c 1500 $R/compile.json; echo; head -40 $R/cubin-log.txt
( cd $R && KILN_DUMP=cubin-log timeout 60 "$K/bin/kiln_tests" "every reduction op along the last axis, keepdim or not, is one row_reduction kernel" > tests-resources.log 2>&1; echo "resources test rc=$?"; tail -30 tests-resources.log | head -30 )
echo "== A/B $SECONDS s"
C='"persistent":0,"threads_per_row":1,"vector":1'
{
for round in 1 2; do
  for cs in "sum(0) [32768x4096 bfloat16]" "sum(r*x,0) [32768x4096 bfloat16]" "sum(0) [32768x4096 float32]" "sum(r*x,0) [32768x4096 float32]"; do
    for cfg in '' "{$C,\"threads\":128,\"unroll\":8,\"lanes\":1}" "{$C,\"threads\":128,\"unroll\":8,\"lanes\":2}" "{$C,\"threads\":128,\"unroll\":8,\"lanes\":4}" "{$C,\"threads\":64,\"unroll\":8,\"lanes\":8}" "{$C,\"threads\":128,\"unroll\":16,\"lanes\":4}" "{$C,\"threads\":64,\"unroll\":4,\"lanes\":8}" "{$C,\"threads\":128,\"unroll\":4,\"lanes\":4}"; do
      echo "== $cs ${cfg:-heuristic}"
      if [ -n "$cfg" ]; then KILN_ROW_CONFIG="$cfg" timeout 30 "$K/bin/bench_reduction" "$cs" 2>&1 | grep -E "kiln .*kernel|FAIL|rror"
      else timeout 30 "$K/bin/bench_reduction" "$cs" 2>&1 | grep -E "kiln .*kernel|FAIL|rror"; fi
    done
  done
done
} 2>&1 | tee "$R/ab.log" | grep -v "^==" 
echo "== anchors $SECONDS s"
( cd $K/anchors && OUT=$R KILN_ANCHOR_BUDGET_S=150 timeout 200 python3 anchors_reduction.py "sum(0) [" "sum(r*x,0) [" > $R/anchors.log 2>&1; echo "anchors rc=$?" )
grep -E "sum\(0\)|sum\(r\*x" $R/anchors.log | head -20
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
