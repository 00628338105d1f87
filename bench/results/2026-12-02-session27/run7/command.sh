#!/usr/bin/env bash
# Session 27 final call (bundle 5a6a0d6): every pointwise and reduction
# benchmark next to the anchors (torch eager, torch.compile, Triton;
# floor.cu's launch and copy).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_TIMEOUT_BENCH=150 \
  KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=470 bash scripts/gpu-run.sh "$R/b" > $R/gpu-run-bench.log 2>&1; echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" 2>&1 | tail -80
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
