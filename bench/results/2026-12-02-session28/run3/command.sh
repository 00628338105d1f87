#!/usr/bin/env bash
# Session 28 call 3: pin_shared (held rows that all start at once load the
# weights at the row's start). A = the override {"pin_shared": 0} (the
# kernels before), B = the heuristic (pin_shared on rmsnorm's small rows).
# Small batches: bench_reduction (exports), then anchors_reduction.py's
# kernel time after the flush, graph replay and do_bench, A, B, A, B.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib
small=("[1x4096" "[64x4096" "[512x4096")
for v in A B; do
  mkdir -p "$R/k$v"
  if [ $v = A ]; then export KILN_ROW_CONFIG='{"pin_shared": 0}'; else unset KILN_ROW_CONFIG; fi
  env KILN_EXPORT_KERNELS="$R/k$v" KILN_CACHE_DIR=/tmp/cache-$v timeout 100 $K/bin/bench_reduction "${small[@]}" > "$R/bench-$v.log" 2>&1
  echo "== bench $v"; grep -h "kiln [0-9] kernel\|FAIL\|back to back" "$R/bench-$v.log" | cut -c1-150
  grep -h "kiln_row0: schedule" "$R/bench-$v.log" | cut -c1-160 | sort -u
done
unset KILN_ROW_CONFIG
for round in 1 2; do
  for v in A B; do
    (cd $K/anchors && env PYTHONUNBUFFERED=1 KILN_KERNELS="$R/k$v" timeout 150 python3 anchors_reduction.py "${small[@]}") 2>&1 | grep -v Warning > "$R/anchors-$v$round.log"
    echo "== anchors $v round $round ($SECONDS s)"; grep -h "kernel time\|graph" "$R/anchors-$v$round.log" | sed 's/  */ /g' | cut -c1-140
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
