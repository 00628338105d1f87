#!/usr/bin/env bash
# Session 28 call 8: anchors_reduction.py (this tree's) times every exported
# variant of a case: bench_reduction exports the heuristic's kernels and,
# under KILN_ROW_CONFIG='{"evict": 0}', a variant, into one folder; then the
# small batches' kernel time after the flush for both.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R/k"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
small=("[64x4096" "[512x4096")
env KILN_EXPORT_KERNELS="$R/k" timeout 60 $K/bin/bench_reduction "${small[@]}" > "$R/bench-B.log" 2>&1
env KILN_EXPORT_KERNELS="$R/k" KILN_ROW_CONFIG='{"evict": 0}' timeout 60 $K/bin/bench_reduction "${small[@]}" > "$R/bench-A.log" 2>&1
cut -c1-90 "$R/k/kernels.jsonl"
(cd bench && env PYTHONUNBUFFERED=1 OUT="$R" KILN_KERNELS="$R/k" timeout 120 python3 anchors_reduction.py "${small[@]}") 2>&1 | grep -v Warning > "$R/anchors.log"
grep -h "kiln\|torch.compile" "$R/anchors.log" | grep "kernel time\|graph\|do_bench\|rror" | sed 's/  */ /g' | cut -c1-130
python3 bench/tables.py "$R" 2>&1 | tail -6
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
