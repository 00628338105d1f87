#!/usr/bin/env bash
# Session 48 call 3: only on an H200 (calls 1 and 2 got H100s): the idle-SM
# probe, then every pointwise and reduction benchmark next to the anchors in
# the time left. On an H100 it stops at once.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
[[ "$GPU" == *H200* ]] || { echo "not an H200: nothing run"; exit 0; }
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
timeout 60 .device/idle_sms > $R/idle_sms.log 2>&1; echo "idle_sms rc=$? $SECONDS s"; cat $R/idle_sms.log
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="reduction pointwise" \
  KILN_TIMEOUT_BENCH=170 KILN_TIMEOUT_ANCHORS=$((315 - SECONDS - 175)) KILN_DEADLINE_S=$((318 - SECONDS)) \
  bash .device/gpu-run.sh "$R/b" > $R/gpu-run.out 2>&1
echo "gpu-run rc=$? $SECONDS s"; tail -3 $R/gpu-run.out
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; cat "$R/tables.md" | head -100
grep -h "launch host cost: kiln" "$R/b/bench-pointwise.log" | tail -1; grep -h "host_us\|per_node\|copy_bw" "$R/b/floor.log" | head -4
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
