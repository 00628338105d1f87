#!/usr/bin/env bash
# Session 48 call 1: the idle-SM probe (bench/probes/idle_sms.cu: kiln's
# 1024x262144 f32 row clusters alone and beside a copy on the SMs they leave
# empty), then every pointwise and reduction benchmark next to the anchors,
# floor.cu and the launch host cost (issues 3 and 4) at HEAD.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
timeout 60 .device/idle_sms > $R/idle_sms.log 2>&1; echo "idle_sms rc=$? $SECONDS s"; cat $R/idle_sms.log
KILN_STAGES="bench anchors" KILN_BENCHES="pointwise reduction" KILN_ANCHORS="pointwise reduction" \
  KILN_TIMEOUT_BENCH=260 KILN_TIMEOUT_ANCHORS=$((560 - SECONDS - 265)) KILN_DEADLINE_S=$((565 - SECONDS)) \
  bash .device/gpu-run.sh "$R/b" > $R/gpu-run.out 2>&1
echo "gpu-run rc=$? $SECONDS s"; tail -3 $R/gpu-run.out
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; cat "$R/tables.md" | head -80
grep -h "launch host cost: kiln" "$R/b/bench-pointwise.log" | tail -1; grep -h "host_us\|per_node\|copy_bw" "$R/b/floor.log" | head -4
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
