#!/usr/bin/env bash
# Session 19 call 2: var/std in parts (B = f702462) against one thread per
# output (A = 2d6a993), whole graph by kiln-tune's timing of the heuristic,
# torch eager / torch.compile by do_bench (var.py); the new GPU tests (var/std
# in parts, normalizations over a non-last axis) and the column tests; the
# 1024x262144 norms under held clusters of 16 and looped clusters of 2-16.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
for v in a b; do
  W=/tmp/kiln-$v; rm -rf $W && mkdir -p $W
  f=.device/kiln-bundle.tar.xz; [ $v = a ] && f=.device/kiln-bundle-a.tar.xz
  xz -dc $f | tar -C $W -xf -
done
KB=/tmp/kiln-b/kiln
export LD_LIBRARY_PATH=$KB/lib:${LD_LIBRARY_PATH:-}
cat $KB/COMMIT
( cd $R && timeout 250 "$KB/bin/kiln_tests" "var and std split into parts match the reference" > tests-var.log 2>&1; echo "var tests rc=$?"; tail -n 3 tests-var.log ) &
( cd $R && timeout 250 "$KB/bin/kiln_tests" "softmax and norms over a non-last axis match the reference" > tests-norm-axis.log 2>&1; echo "norm-axis tests rc=$?"; tail -n 3 tests-norm-axis.log ) &
( cd $R && timeout 250 "$KB/bin/kiln_tests" "column reductions (split into parts or not) match the reference" > tests-columns.log 2>&1; echo "column tests rc=$?"; tail -n 3 tests-columns.log ) &
wait
echo "== var $SECONDS s"
for v in a b; do
  K=/tmp/kiln-$v/kiln
  for gname in var0f var0b stdall; do
    LD_LIBRARY_PATH=$K/lib KILN_CACHE=0 timeout 100 "$K/bin/kiln-tune" tune .device/$gname.graph --verbose --iters 20 -o $R/tune-$v-$gname.json > $R/tune-$v-$gname.log 2>&1; echo "$v $gname rc=$?"
    grep -E "tuned now" $R/tune-$v-$gname.log | head -4
  done
done
timeout 120 python3 .device/var.py 2>&1 | tee $R/var-torch.log | grep -v Warning
echo "== 262144 $SECONDS s"
for cfg in '' '{"cluster":16,"threads_per_row":256}' '{"cluster":16,"threads_per_row":512}' \
  '{"persistent":0,"cluster":8,"threads_per_row":512,"unroll":4,"evict":1}' '{"persistent":0,"cluster":8,"threads_per_row":256,"unroll":4,"evict":1}' \
  '{"persistent":0,"cluster":16,"threads_per_row":256,"unroll":4,"evict":1}' '{"persistent":0,"cluster":4,"threads_per_row":512,"unroll":4,"evict":1}' \
  '{"persistent":0,"cluster":2,"threads_per_row":1024,"unroll":4,"evict":1}'; do
  echo "== ${cfg:-heuristic} $SECONDS s"
  KILN_ROW_CONFIG="$cfg" timeout 60 "$KB/bin/bench_reduction" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "layernorm [1024x262144" 2>&1 | tee -a "$R/sweep.log" | grep -i "kiln .*kernel\|error\|FAIL" | head -10
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
