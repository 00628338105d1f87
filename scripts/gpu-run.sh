#!/usr/bin/env bash
# GPU machine: unpacks .device/kiln-bundle.tar.xz, runs the [gpu] tests and
# the benchmarks side by side with the anchors, and writes logs and JSON into
# the output folder given as $1 (default $OUT). Stages: tests, bench, anchors
# (pick some with KILN_STAGES="tests bench").
#
#   KILN_STAGES   stages to run (default "tests bench anchors")
#   KILN_BENCHES  kiln benchmarks of the bench stage: pointwise, reduction,
#                 backward (the op library's gradients; KILN_BACKWARD_CASES:
#                 bench_backward's case substrings), matmul
#                 (KILN_MATMUL_CASES: bench_matmul's case substrings)
#                 (default "pointwise reduction")
#   KILN_REDUCTION_CASES  arguments of bench_reduction (case substrings)
#   KILN_ANCHORS  anchor scripts of the anchors stage: pointwise
#                 (bench/anchors_pointwise.py), reduction
#                 (bench/anchors_reduction.py), backward
#                 (bench/anchors_backward.py), matmul (bench/anchors_matmul.py:
#                 small M, the nn.Linear layout), and any arguments of
#                 shared/bench/anchors.py (launch mem1 mem2 gemm extra), run
#                 after those (default "pointwise reduction")
#   KILN_SWEEP    set: also run `bench_pointwise sweep`
#   KILN_VARIANTS set: also export `bench_pointwise variants` and time them
#                 next to torch.compile (`anchors_pointwise.py variants`)
#   KILN_ANCHOR_CASES  arguments of anchors_reduction.py (case substrings)
#   KILN_PACK     set: pack the output folder into $1.tgz at the end (and
#                 remove the folder): the device tool brings back only a
#                 few files per call
#   KILN_BENCH_TUNE  set: the benchmarks also tune every case and time the
#                 tuned kernel next to the heuristic's (database in
#                 $OUT/tuning-bench-*.json)
#   tuning stage  lesson 3 (tune offline, then the application in a second
#                 process), `kiln-tune tune` over examples/graphs/
#                 tune.manifest (database in $OUT/kiln-tune.json), and
#                 bench_warm_start (graph to launchable kernel from the cache)
#
# Time: the device call allows 600 s, so every step runs under `timeout`:
# each stage has a cap (KILN_TIMEOUT_TESTS 480 s, KILN_TIMEOUT_BENCH 200 s,
# KILN_TIMEOUT_ANCHORS 420 s) and the whole run a deadline (KILN_DEADLINE_S,
# 570 s after start); a step gets what is left of both, and is skipped when
# less than 15 s is left. A step that times out says so in run.log and
# makes the exit status 1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUTDIR=${1:-${OUT:-/tmp/kiln-out}}
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
STAGES=${KILN_STAGES:-"tests bench anchors"}
BENCH_TUNE_POINTWISE=""; BENCH_TUNE_REDUCTION=""
if [ -n "${KILN_BENCH_TUNE:-}" ]; then
  BENCH_TUNE_POINTWISE=$OUTDIR/tuning-bench-pointwise.json
  BENCH_TUNE_REDUCTION=$OUTDIR/tuning-bench-reduction.json
fi
BENCHES=${KILN_BENCHES:-"pointwise reduction"}
ANCHORS=${KILN_ANCHORS:-"pointwise reduction"}
DEADLINE=$((SECONDS + ${KILN_DEADLINE_S:-570}))
WORK=/tmp/kiln-bundle
rm -rf "$WORK" && mkdir -p "$WORK"
xz -dc .device/kiln-bundle.tar.xz | tar -C "$WORK" -xf -
K=$WORK/kiln
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$PATH:$CUDA_HOME/bin
export OUT=$OUTDIR
LOG=$OUTDIR/run.log
echo "commit $(tr '\n' ' ' < $K/COMMIT); $(date -u +%FT%TZ)" | tee "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$LOG"

status=0
STAGE_END=$DEADLINE
# stage_begin CAP: this stage ends CAP seconds from now, or at the deadline.
stage_begin() {
  STAGE_END=$((SECONDS + $1))
  [ "$STAGE_END" -gt "$DEADLINE" ] && STAGE_END=$DEADLINE
  return 0
}
# left: seconds left in the current stage.
left() { echo $((STAGE_END - SECONDS)); }
# bounded CMD...: runs CMD under `timeout` with the stage's time left;
# skips it when less than 15 s is left. Returns CMD's status (124: timed out).
bounded() {
  local t
  t=$(left)
  if [ "$t" -lt 15 ]; then
    echo "!! skipped (only ${t} s left in the stage or before the deadline): $*" >&2
    return 124
  fi
  timeout -k 10 "$t" "$@"
  local rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "!! timed out after ${t} s: $*" >&2
  fi
  return "$rc"
}

# gpu_tests BIN DIR: every [gpu] test case of BIN in its own process,
# KILN_TEST_JOBS (default 8) at a time: the cases spend most of their time
# compiling on the CPU, one core each, so the suite takes the time of its
# longest case instead of their sum. Known long cases start first
# (KILN_TEST_FIRST: name substrings); cases that compare timings
# (KILN_TEST_ALONE) run alone at the end. Each case's log is DIR/N.log, its exit
# status and name DIR/N.rc; DIR.log sums them up (and holds the failed
# cases' logs). Returns 1 if a case failed or did not finish.
gpu_tests() {
  local bin=$1 dir=$2 jobs=${KILN_TEST_JOBS:-8} i=0 name pat
  rm -rf "$dir" && mkdir -p "$dir"
  "$bin" "[gpu]" --list-test-names-only 2>/dev/null | sed -e 's/^ *//' -e '/^$/d' > "$dir/all.txt"
  : > "$dir/names.txt"
  for pat in ${KILN_TEST_FIRST:-cluster prefetch composite sweep staged}; do
    grep -F -- "$pat" "$dir/all.txt" | grep -vxF -f "$dir/names.txt" >> "$dir/names.txt"
  done
  grep -vxF -f "$dir/names.txt" "$dir/all.txt" >> "$dir/names.txt"
  # Cases whose checks compare timings (KILN_TEST_ALONE: name substrings)
  # run after the others, one at a time: beside seven other processes'
  # kernels on the same GPU their timings are not the kernels' own
  # (session 36 call 7).
  : > "$dir/alone.txt"
  for pat in ${KILN_TEST_ALONE:-tuning:}; do grep -F -- "$pat" "$dir/names.txt" >> "$dir/alone.txt"; done
  run_case() {
    # Catch's test specs split at commas and read brackets as tags, and
    # take wildcards only at the ends: such a name is matched by its
    # longest piece without them.
    local spec=$2
    case $2 in *[],[]*)
      spec="*$(printf '%s' "$2" | tr ',[]' '\n\n\n' | awk '{ if (length($0) > length(m)) m = $0 } END { print m }')*" ;;
    esac
    bounded "$bin" "$spec" --reporter compact --durations yes > "$dir/$1.log" 2>&1
    echo "$? $2" > "$dir/$1.rc"
  }
  while IFS= read -r name; do
    i=$((i + 1))
    grep -qxF -- "$name" "$dir/alone.txt" && continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_case "$i" "$name" &
  done < "$dir/names.txt"
  wait
  i=0
  while IFS= read -r name; do
    i=$((i + 1))
    grep -qxF -- "$name" "$dir/alone.txt" && run_case "$i" "$name"
  done < "$dir/names.txt"
  local total=0 passed=0 skipped=0 bad=0 rc
  {
    for f in "$dir"/*.rc; do
      [ -e "$f" ] || continue
      total=$((total + 1))
      read -r rc name < "$f"
      if [ "$rc" -eq 0 ]; then passed=$((passed + 1))
      elif [ "$rc" -eq 77 ]; then  # the test main's status for a case that skipped itself
        skipped=$((skipped + 1))
        echo "---- skipped: $name: $(grep -m1 SKIPPED "${f%.rc}.log")"
      else
        bad=$((bad + 1))
        echo "---- FAILED (exit $rc$([ "$rc" -eq 124 ] && echo ', timed out')): $name"
        tail -n 40 "${f%.rc}.log"
      fi
    done
    echo "$(basename "$bin") [gpu]: $(wc -l < "$dir/names.txt") test cases in $jobs processes: $passed passed," \
      "$skipped skipped, $bad failed or timed out, $(($(wc -l < "$dir/names.txt") - total)) not run"
  } > "$dir.log" 2>&1
  tail -n 1 "$dir.log" | tee -a "$LOG"
  [ "$bad" -eq 0 ] && [ "$total" -eq "$(wc -l < "$dir/names.txt")" ]
}

if [[ " $STAGES " == *" tests "* ]]; then
  stage_begin "${KILN_TIMEOUT_TESTS:-480}"
  echo "== [gpu] tests" | tee -a "$LOG"
  # The runtime's few quick cases first, so that a stage cap reached by the
  # long kiln_tests cases does not cut them (session 18 call 7).
  gpu_tests "$K/bin/kiln_runtime_tests" "$OUTDIR/tests-runtime-gpu"; s2=$?
  # The facade's (multi-kernel plans, the workspace; bundles since session 24).
  s3=0
  for t in kiln_facade_tests kiln_facade_workspace_tests kiln_aot_tests kiln_interop_tests; do
    if [ -x "$K/bin/$t" ]; then gpu_tests "$K/bin/$t" "$OUTDIR/tests-${t#kiln_}-gpu" || s3=1; fi
  done
  gpu_tests "$K/bin/kiln_tests" "$OUTDIR/tests-gpu"; s1=$?
  [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] && [ "$s3" -eq 0 ] || status=1
  bounded "$K/bin/lesson_01_bias_gelu" 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if [ -x "$K/bin/lesson_02_row_reductions" ]; then
    bounded "$K/bin/lesson_02_row_reductions" 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if [ -x "$K/bin/lesson_04_linear" ]; then
    bounded "$K/bin/lesson_04_linear" 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if [ -x "$K/bin/lesson_05_aot" ]; then
    bounded "$K/bin/lesson_05_aot" 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if [ -x "$K/bin/lesson_06_cuda_graphs" ]; then
    bounded "$K/bin/lesson_06_cuda_graphs" 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if [ -x "$K/bin/lesson_08_training_step" ]; then
    bounded "$K/bin/lesson_08_training_step" 2>&1 | tee -a "$LOG"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  # kiln from PyTorch: python/kiln_torch.py on lesson 7's library (the
  # tests, then the lesson).
  if [ -f "$K/lib/libkiln_lesson07.so" ]; then
    echo "== kiln from PyTorch (tests/torch, lesson 7)" | tee -a "$LOG"
    bounded python3 tests/torch/test_kiln_torch.py "$K/lib/libkiln_lesson07.so" "$K/lib/libkiln_jit.so" 2>&1 | tee "$OUTDIR/torch-tests.log" | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    bounded python3 examples/lesson_07_pytorch.py "$K/lib/libkiln_lesson07.so" 2>&1 | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
if [[ " $STAGES " == *" tuning "* ]]; then
  stage_begin "${KILN_TIMEOUT_TUNING:-150}"
  echo "== tuning (lesson 3, kiln-tune)" | tee -a "$LOG"
  bounded "$K/bin/lesson_03_tuning" "$OUTDIR/lesson3-ship" 2>&1 | tee "$OUTDIR/lesson3.log" | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  rm -rf "$OUTDIR/lesson3-ship/kernels"
  bounded "$K/bin/kiln-tune" tune --manifest "$K/graphs/tune.manifest" -o "$OUTDIR/kiln-tune.json" 2>&1 \
    | tee "$OUTDIR/kiln-tune.log" | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  "$K/bin/kiln-tune" show "$OUTDIR/kiln-tune.json" 2>&1 | tee -a "$LOG"
  bounded "$K/bin/bench_warm_start" 12 2>&1 | tee "$OUTDIR/warm-start.log" | tee -a "$LOG"
fi
if [[ " $STAGES " == *" bench "* ]]; then
  stage_begin "${KILN_TIMEOUT_BENCH:-200}"
  echo "== kiln benchmarks ($BENCHES)" | tee -a "$LOG"
  if [[ " $BENCHES " == *" pointwise "* ]]; then
    # Its kernels also go to kiln-kernels/, where anchors_pointwise.py times
    # them with do_bench next to torch.compile (one method for both).
    rm -rf "$OUTDIR/kiln-kernels" && mkdir -p "$OUTDIR/kiln-kernels"
    bounded env KILN_BENCH_TUNE="$BENCH_TUNE_POINTWISE" KILN_EXPORT_KERNELS="$OUTDIR/kiln-kernels" \
      "$K/bin/bench_pointwise" 2>&1 | tee "$OUTDIR/bench-pointwise.log" | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    if [ -n "${KILN_VARIANTS:-}" ]; then
      # Configs around the heuristic's for every case, timed next to
      # torch.compile in rounds (anchors_pointwise.py variants).
      rm -rf "$OUTDIR/kiln-variants" && mkdir -p "$OUTDIR/kiln-variants"
      bounded env KILN_EXPORT_KERNELS="$OUTDIR/kiln-variants" "$K/bin/bench_pointwise" variants 2>&1 \
        | tee "$OUTDIR/bench-variants.log" | tee -a "$LOG"
      (cd "$K/anchors" && bounded env PYTHONUNBUFFERED=1 KILN_KERNELS="$OUTDIR/kiln-variants" \
         python3 anchors_pointwise.py variants) 2>&1 | grep -v Warning | tee "$OUTDIR/anchors-variants.log" | tee -a "$LOG"
    fi
    if [ -n "${KILN_SWEEP:-}" ]; then
      bounded "$K/bin/bench_pointwise" sweep 2>&1 | tee "$OUTDIR/bench-sweep.log" | tee -a "$LOG"
    fi
  fi
  if [[ " $BENCHES " == *" matmul "* ]]; then
    # shellcheck disable=SC2086  # case substrings are separate arguments
    bounded "$K/bin/bench_matmul" ${KILN_MATMUL_CASES:-} 2>&1 | tee "$OUTDIR/bench-matmul.log" | grep -v '^{' | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if [[ " $BENCHES " == *" backward "* ]]; then
    # shellcheck disable=SC2086  # case substrings are separate arguments
    bounded "$K/bin/bench_backward" ${KILN_BACKWARD_CASES:-} 2>&1 | tee "$OUTDIR/bench-backward.log" \
      | grep -v '^JSON ' | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  if [[ " $BENCHES " == *" reduction "* ]]; then
    # The full log (kernel plans, checks, JSON lines) in its own file; the
    # table lines and the summary in run.log.
    # shellcheck disable=SC2086  # case substrings are separate arguments
    rm -rf "$OUTDIR/kiln-kernels-reduction" && mkdir -p "$OUTDIR/kiln-kernels-reduction"
    bounded env KILN_BENCH_TUNE="$BENCH_TUNE_REDUCTION" KILN_EXPORT_KERNELS="$OUTDIR/kiln-kernels-reduction" "$K/bin/bench_reduction" ${KILN_REDUCTION_CASES:-} 2>&1 | tee "$OUTDIR/bench-reduction.log" \
      | grep -v '^JSON \|^  |' | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
if [[ " $STAGES " == *" anchors "* ]]; then
  stage_begin "${KILN_TIMEOUT_ANCHORS:-420}"
  echo "== anchors (floor.cu; $ANCHORS)" | tee -a "$LOG"
  # shellcheck disable=SC2016  # $1 expands in the inner shell
  bounded bash -c 'cd "$1" && nvcc -arch=sm_90 -O2 floor.cu -o floor -lcuda -lnvrtc && ./floor' _ "$K/anchors" 2>&1 \
    | tee "$OUTDIR/floor.log" | tee -a "$LOG"
  shared_args=()
  for a in $ANCHORS; do
    case "$a" in
      pointwise)
        kk=""; [ -s "$OUTDIR/kiln-kernels/kernels.jsonl" ] && kk="$OUTDIR/kiln-kernels"
        (cd "$K/anchors" && bounded env PYTHONUNBUFFERED=1 KILN_KERNELS="$kk" python3 anchors_pointwise.py) 2>&1 \
          | grep -v Warning | tee "$OUTDIR/anchors.log" | tee -a "$LOG"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
      reduction)
        # The script stops starting torch.compile compiles when its budget
        # is spent; give it what is left of the stage, less a margin.
        budget=$(( $(left) - 45 ))
        [ "$budget" -lt 0 ] && budget=0
        (cd "$K/anchors" && bounded env PYTHONUNBUFFERED=1 KILN_ANCHOR_BUDGET_S=$budget \
           KILN_KERNELS="$OUTDIR/kiln-kernels-reduction" python3 anchors_reduction.py ${KILN_ANCHOR_CASES:-}) 2>&1 \
          | grep -v Warning | tee "$OUTDIR/anchors-reduction.log" | tee -a "$LOG"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
      backward)
        # shellcheck disable=SC2086  # case substrings are separate arguments
        (cd "$K/anchors" && bounded env PYTHONUNBUFFERED=1 python3 anchors_backward.py ${KILN_BACKWARD_CASES:-}) 2>&1 \
          | grep -v Warning | tee "$OUTDIR/anchors-backward.log" | tee -a "$LOG"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
      matmul)
        (cd "$K/anchors" && bounded env PYTHONUNBUFFERED=1 python3 anchors_matmul.py) 2>&1 \
          | grep -v Warning | tee "$OUTDIR/anchors-matmul.log" | tee -a "$LOG"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
      *) shared_args+=("$a") ;;
    esac
  done
  if [ "${#shared_args[@]}" -gt 0 ]; then
    (cd "$K/anchors" && bounded env PYTHONUNBUFFERED=1 python3 anchors.py "${shared_args[@]}") 2>&1 \
      | grep -v Warning | tee "$OUTDIR/anchors-shared.log" | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
echo "gpu-run: done in ${SECONDS} s, status $status" | tee -a "$LOG"
if [ -n "${KILN_PACK:-}" ]; then
  # One archive instead of the folder: the device tool returns only a few files per call.
  tar -C "$(dirname "$OUTDIR")" -czf "$OUTDIR.tgz" "$(basename "$OUTDIR")" && rm -rf "$OUTDIR"
  echo "gpu-run: packed into $OUTDIR.tgz"
fi
exit $status
