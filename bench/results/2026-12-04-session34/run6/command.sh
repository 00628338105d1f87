#!/usr/bin/env bash
# Session 34 call 6 (bundle of the commit it prints): every reduction
# benchmark next to the reduction anchors (eager, torch.compile, Triton;
# kiln's exported cubins under the anchors' do_bench too).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction" KILN_ANCHORS="reduction" \
  KILN_TIMEOUT_BENCH=130 KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=470 bash scripts/gpu-run.sh "$R/b" > "$R/bench.log" 2>&1
echo "bench rc=$? $SECONDS s"
python3 bench/tables.py "$R/b" > "$R/tables.md" 2>&1; head -45 "$R/tables.md"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
