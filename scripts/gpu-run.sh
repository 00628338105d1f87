#!/usr/bin/env bash
# GPU machine: unpacks .device/kiln-bundle.tar.xz, runs the [gpu] tests and
# the benchmarks side by side with the anchors, and writes logs and JSON into
# the output folder given as $1 (default $OUT). Stages: tests, bench, anchors
# (pick some with KILN_STAGES="tests bench").
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-/tmp/kiln-out}}
mkdir -p "$OUTDIR"
STAGES=${KILN_STAGES:-"tests bench anchors"}
WORK=/tmp/kiln-bundle
rm -rf "$WORK" && mkdir -p "$WORK"
xz -dc .device/kiln-bundle.tar.xz | tar -C "$WORK" -xf -
K=$WORK/kiln
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export OUT=$OUTDIR
echo "commit $(tr '\n' ' ' < $K/COMMIT); $(date -u +%FT%TZ)" | tee "$OUTDIR/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$OUTDIR/run.log"

status=0
if [[ " $STAGES " == *" tests "* ]]; then
  echo "== [gpu] tests" | tee -a "$OUTDIR/run.log"
  "$K/bin/kiln_tests" "[gpu]" --reporter compact 2>&1 | tail -n 60 > "$OUTDIR/tests-gpu.log"; s1=${PIPESTATUS[0]}
  "$K/bin/kiln_runtime_tests" "[gpu]" --reporter compact 2>&1 | tail -n 30 > "$OUTDIR/tests-runtime-gpu.log"; s2=${PIPESTATUS[0]}
  tail -n 3 "$OUTDIR/tests-gpu.log" "$OUTDIR/tests-runtime-gpu.log" | tee -a "$OUTDIR/run.log"
  [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] || status=1
  "$K/bin/lesson_01_bias_gelu" 2>&1 | tee -a "$OUTDIR/run.log" || status=1
fi
if [[ " $STAGES " == *" bench "* ]]; then
  echo "== kiln benchmarks" | tee -a "$OUTDIR/run.log"
  "$K/bin/bench_pointwise" 2>&1 | tee "$OUTDIR/bench-pointwise.log" | tee -a "$OUTDIR/run.log"
  if [ -n "${KILN_SWEEP:-}" ]; then
    "$K/bin/bench_pointwise" sweep 2>&1 | tee "$OUTDIR/bench-sweep.log" | tee -a "$OUTDIR/run.log"
  fi
fi
if [[ " $STAGES " == *" anchors "* ]]; then
  echo "== anchors (floor.cu, anchors.py)" | tee -a "$OUTDIR/run.log"
  (cd "$K/anchors" && nvcc -arch=sm_90 -O2 floor.cu -o floor -lcuda -lnvrtc 2>&1 && ./floor) 2>&1 \
    | tee "$OUTDIR/floor.log" | tee -a "$OUTDIR/run.log"
  # KILN_ANCHORS: "pointwise" (kiln's own trimmed anchor script, fast) or the
  # arguments of shared/bench/anchors.py (launch, mem1, mem2, gemm, extra).
  if [ "${KILN_ANCHORS:-pointwise}" = pointwise ]; then
    (cd "$K/anchors" && PYTHONUNBUFFERED=1 timeout 400 python3 anchors_pointwise.py) 2>&1 \
      | grep -v Warning | tee "$OUTDIR/anchors.log" | tee -a "$OUTDIR/run.log"
  else
    (cd "$K/anchors" && PYTHONUNBUFFERED=1 timeout 400 python3 anchors.py $KILN_ANCHORS) 2>&1 \
      | grep -v Warning | tee "$OUTDIR/anchors.log" | tee -a "$OUTDIR/run.log"
  fi
fi
exit $status
