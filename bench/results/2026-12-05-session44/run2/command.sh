#!/usr/bin/env bash
# Session 44 call 2 (bundle of the commit it prints, 7b7391e): the [gpu]
# cases that call 1's shortened tests stage cut off or never reached (held
# rows with the next row prefetched, the tuning test, the lessons,
# kiln_torch), then kiln-tune on the attention-scores block at T 4096
# (how far the heuristic's two kernels are from the best of their spaces)
# and the block timed with and without the tuned database.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
( KILN_CACHE_DIR=$(mktemp -d) timeout 420 $K/bin/kiln_tests "held rows with the next row prefetched*" --reporter compact --durations yes > $R/held-prefetch.log 2>&1; echo "held-prefetch rc=$?" >> $R/held-prefetch.log ) &
BG=$!
for l in lesson_01_bias_gelu lesson_02_row_reductions lesson_04_linear lesson_05_aot lesson_06_cuda_graphs lesson_08_training_step; do
  KILN_CACHE_DIR=$(mktemp -d) timeout 90 $K/bin/$l > $R/$l.log 2>&1; echo "$l rc=$?"
done
timeout 120 python3 tests/torch/test_kiln_torch.py $K/lib/libkiln_lesson07.so $K/lib/libkiln_jit.so > $R/torch-tests.log 2>&1; echo "kiln_torch tests rc=$?"; grep -E "PASS|FAIL" $R/torch-tests.log
timeout 90 python3 examples/lesson_07_pytorch.py $K/lib/libkiln_lesson07.so > $R/lesson_07.log 2>&1; echo "lesson_07 rc=$?"
echo "== lessons done $SECONDS s"
wait $BG; tail -3 $R/held-prefetch.log
echo "== held rows done $SECONDS s"
KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "tuning: softmax and gelu*" --reporter compact --durations yes > $R/tuning-test.log 2>&1; echo "tuning test rc=$?"; tail -2 $R/tuning-test.log
KILN_CACHE_DIR=$(mktemp -d) timeout 150 $K/bin/kiln-tune tune examples/graphs/attention_scores.kiln --dim T=4096 -o $R/tune-attn.json > $R/tune-attn.log 2>&1; echo "kiln-tune rc=$?"; tail -20 $R/tune-attn.log
$K/bin/kiln-tune show $R/tune-attn.json 2>&1 | tail -5
for db in none tuned; do
  if [ $db = tuned ]; then export KILN_TUNING_PATH=$R/tune-attn.json; else unset KILN_TUNING_PATH; fi
  mkdir -p /tmp/nohome-$db; HOME=/tmp/nohome-$db KILN_BLOCK_PARTS=1 KILN_CACHE_DIR=$(mktemp -d) timeout 70 $K/bin/bench_matmul block > $R/bench-$db.log 2>&1; echo "bench $db rc=$?"; grep -v '^{' $R/bench-$db.log
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
