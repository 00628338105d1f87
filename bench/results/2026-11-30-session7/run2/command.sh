#!/usr/bin/env bash
# session 7, device call 2: staged rows (stage) sweep vs the heuristic, staged GPU tests, small batches via do_bench
mkdir -p /tmp/kb && xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kb -xf -
K=/tmp/kb/kiln; export LD_LIBRARY_PATH=$K/lib; export PATH=$PATH:/usr/local/cuda/bin
cd $K/bin
S=$SECONDS
echo "commit $(cat $K/COMMIT)"
timeout 150 ./kiln_tests "rows staged in shared memory by bulk copies match the reference" --reporter compact 2>&1 | tail -30 > $OUT/tests-staged.log; echo "staged tests rc=${PIPESTATUS[0]} $((SECONDS-S)) s"; tail -3 $OUT/tests-staged.log
timeout 60 ./bench_reduction "[4096x32768 bfloat16]" > $OUT/bench-heuristic.log 2>&1; echo "heuristic rc=$? $((SECONDS-S)) s"; grep -E "kiln [0-9] kernel" $OUT/bench-heuristic.log
for cfg in '256 1' '256 2' '512 1' '512 2'; do set -- $cfg
  C="{\"persistent\": 0, \"stage\": 1, \"threads_per_row\": $1, \"unroll\": $2}"
  echo "== $C"
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "[4096x32768 bfloat16]" > "$OUT/bench-stage-$1-$2.log" 2>&1; echo "rc=$? $((SECONDS-S)) s"; grep -E "kiln [0-9] kernel|FAIL" "$OUT/bench-stage-$1-$2.log"
done
for cfg in '256 1' '512 1'; do set -- $cfg
  C="{\"persistent\": 0, \"stage\": 1, \"threads_per_row\": $1, \"unroll\": $2}"
  echo "== 32768x4096 $C"
  KILN_ROW_CONFIG="$C" timeout 60 ./bench_reduction "softmax(-1) [32768x4096 bfloat16]" "rmsnorm [32768x4096 bfloat16]" "[32768x4096 float32]" > "$OUT/bench-stage-short-$1-$2.log" 2>&1; echo "rc=$? $((SECONDS-S)) s"; grep -E "kiln [0-9] kernel|FAIL" "$OUT/bench-stage-short-$1-$2.log"
done
mkdir -p $OUT/kr
KILN_EXPORT_KERNELS=$OUT/kr timeout 60 ./bench_reduction "[1x4096" "[64x4096" "[512x4096" > $OUT/bench-small.log 2>&1; echo "bench small rc=$? $((SECONDS-S)) s"
grep -E "us per call" $OUT/bench-small.log; wc -l $OUT/kr/kernels.jsonl
(cd $K/anchors && KILN_KERNELS=$OUT/kr timeout 150 python3 anchors_reduction.py "[1x4096" "[64x4096" "[512x4096") > $OUT/anchors-small.log 2>&1; echo "anchors small rc=$? $((SECONDS-S)) s"
grep -v "back to back" $OUT/anchors-small.log | grep -E "us "
tar -C $OUT -czf $OUT/kr.tgz kr && rm -rf $OUT/kr
echo "done $((SECONDS-S)) s"
