#!/usr/bin/env bash
# Session 48 call 2. On an H200: the idle-SM probe (bench/probes/idle_sms.cu)
# and every pointwise and reduction benchmark next to the anchors (issues 3
# and 4 are H200 numbers; call 1 got an H100), then random graphs on the GPU.
# On an H100 (call 1 measured those there): every [gpu] test at HEAD, then
# random graphs on the GPU with the time left.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
if [[ "$GPU" == *H200* ]]; then
  timeout 60 .device/idle_sms > $R/idle_sms.log 2>&1; echo "idle_sms rc=$? $SECONDS s"; cat $R/idle_sms.log
  KILN_STAGES="bench anchors" KILN_BENCHES="pointwise reduction" KILN_ANCHORS="pointwise reduction" \
    KILN_TIMEOUT_BENCH=260 KILN_TIMEOUT_ANCHORS=$((560 - SECONDS - 265)) KILN_DEADLINE_S=$((565 - SECONDS)) \
    bash .device/gpu-run.sh "$R/b" > $R/gpu-run.out 2>&1
  echo "gpu-run rc=$? $SECONDS s"; tail -3 $R/gpu-run.out
  python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; cat "$R/tables.md" | head -100
  grep -h "launch host cost: kiln" "$R/b/bench-pointwise.log" | tail -1; grep -h "host_us\|per_node\|copy_bw" "$R/b/floor.log" | head -4
else
  KILN_STAGES="tests" KILN_TIMEOUT_TESTS=460 KILN_DEADLINE_S=470 bash .device/gpu-run.sh "$R/t" > $R/gpu-run.out 2>&1
  echo "tests rc=$? $SECONDS s"; tail -12 $R/gpu-run.out
fi
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
i=0
while [ $SECONDS -lt 530 ]; do
  seed=$((48300000 + 200 * i)); i=$((i+1))
  KILN_RANDOM_SEED=$seed KILN_RANDOM_GRAPHS=200 KILN_CACHE_DIR=$(mktemp -d) timeout 60 $K/bin/kiln_tests "random graphs match the reference on the GPU" > $R/random-$seed.log 2>&1
  echo "random 200 from $seed rc=$? $SECONDS s: $(grep -E 'passed|failed' $R/random-$seed.log | tail -1)"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
