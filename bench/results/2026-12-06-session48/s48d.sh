#!/usr/bin/env bash
# Session 48 call 4. On an H200: the idle-SM probe and every pointwise and
# reduction benchmark next to the anchors (as s48c.sh). On an H100: the
# tuner on the 32768x4096 rows (KILN_BENCH_TUNE), next to the anchors: can
# a tuned config close the H100-only deficits of calls 1 (sum bf16, softmax,
# rmsnorm and layernorm f32 behind torch.compile by 0.1-1.7%)?
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$GPU"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
if [[ "$GPU" == *H200* ]]; then
  timeout 60 .device/idle_sms > $R/idle_sms.log 2>&1; echo "idle_sms rc=$? $SECONDS s"; cat $R/idle_sms.log
  KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="reduction pointwise" \
    KILN_TIMEOUT_BENCH=170 KILN_TIMEOUT_ANCHORS=$((285 - SECONDS - 175)) KILN_DEADLINE_S=$((288 - SECONDS)) \
    bash .device/gpu-run.sh "$R/b" > $R/gpu-run.out 2>&1
else
  KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" KILN_BENCH_TUNE=1 \
    KILN_REDUCTION_CASES="32768x4096" KILN_ANCHOR_CASES="32768x4096" \
    KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=120 KILN_DEADLINE_S=285 \
    bash .device/gpu-run.sh "$R/b" > $R/gpu-run.out 2>&1
fi
echo "gpu-run rc=$? $SECONDS s"; tail -3 $R/gpu-run.out
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; cat "$R/tables.md" | head -100
grep -h "tuned\|tuning" "$R/b/bench-reduction.log" | head -40
grep -h "launch host cost: kiln" "$R/b/bench-pointwise.log" 2>/dev/null | tail -1; grep -h "host_us\|per_node\|copy_bw" "$R/b/floor.log" | head -4
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
