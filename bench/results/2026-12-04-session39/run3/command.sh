#!/usr/bin/env bash
# Session 39 call 3 (the bundle of the commit it prints, the knob taken
# back): the gradients' benchmark next to its anchors (eager autograd,
# torch.compile's backward) with the L2 fetching the column-partial rows
# ahead; lesson 8 (a training step: forward, gradients and AdamW, step 1
# checked against the reference); then every [gpu] test
# (scripts/gpu-run.sh's tests stage, under a deadline).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
KILN_CACHE_DIR=$(mktemp -d) OUT=$R timeout 90 $K/bin/bench_backward > $R/bench-backward.log 2>&1; echo "bench rc=$?"; grep -h "TB/s\|check:\|passed" $R/bench-backward.log
(cd $K/anchors && OUT=$R timeout 70 python3 anchors_backward.py) > $R/anchors-backward.log 2>&1; echo "anchors rc=$?"; grep -v Warning $R/anchors-backward.log | grep "us"
echo "== bench done $SECONDS s"
KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/lesson_08_training_step > $R/lesson8.log 2>&1; echo "lesson 8 rc=$?"; cat $R/lesson8.log
left=$((560 - SECONDS))
KILN_STAGES=tests KILN_TIMEOUT_TESTS=$left KILN_DEADLINE_S=$left bash scripts/gpu-run.sh "$R/t" > $R/tests.log 2>&1; echo "tests rc=$?"
grep -h "test cases in\|passed\|FAILED\|timed out\|not run" $R/tests.log | head -30
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
