#!/usr/bin/env bash
# Session 19 call 3 (d7dd71e): var/std in parts with the looped Welford
# folding a whole step per Chan merge (kiln-tune's heuristic time; torch by
# do_bench); 1024x262144 norms held in clusters of 16 at two blocks per SM
# against the heuristic (clusters of 8, one block per SM), two rounds;
# GPU tests touching Welford and clusters.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for t in "var and std split into parts match the reference" "column reductions whose threads own several adjacent rows (lanes) match the reference" \
         "rows split across a thread-block cluster match the reference" "the op library's row-wise composites match the reference at every row length"; do
  ( cd $R && timeout 280 "$K/bin/kiln_tests" "$t" > "tests-${t:0:12}.log" 2>&1; echo "$t rc=$?"; tail -n 2 "tests-${t:0:12}.log" ) &
done
wait
echo "== var $SECONDS s"
for gname in var0f var0b stdall; do
  KILN_CACHE=0 timeout 100 "$K/bin/kiln-tune" tune .device/$gname.graph --verbose --iters 20 -o $R/tune-$gname.json > $R/tune-$gname.log 2>&1; echo "$gname rc=$?"
  grep -E "tuned now" $R/tune-$gname.log | head -4
done
timeout 120 python3 .device/var.py 2>&1 | tee $R/var-torch.log | grep -v Warning
echo "== 262144 $SECONDS s"
for round in 1 2; do
for cfg in '' '{"cluster":16,"threads_per_row":512}' '{"cluster":16,"threads_per_row":512,"min_blocks":2}' '{"cluster":16,"threads_per_row":256}' \
  '{"cluster":16,"threads_per_row":512,"min_blocks":2,"resident":0}'; do
  echo "== ${cfg:-heuristic} $SECONDS s"
  KILN_ROW_CONFIG="$cfg" timeout 60 "$K/bin/bench_reduction" "softmax(-1) [1024x262144" "rmsnorm [1024x262144" "layernorm [1024x262144" 2>&1 | tee -a "$R/sweep.log" | grep -i "kiln .*kernel\|error\|FAIL" | head -10
done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
