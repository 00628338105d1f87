#!/usr/bin/env bash
# Session 38 call 3 (the bundle of the commit it prints, with the
# experiment-only knobs KILN_COLPART="threads,min_blocks,prefetch" and
# KILN_COLPART_PARTS): the norm gradients' fused kernel (column partials)
# under other forms, and softmax_backward held instead of looped
# (KILN_ROW_CONFIG), each case in its own bench_backward process.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
run() {  # label, env..., case
  local label=$1; shift
  env "$@" timeout 60 $K/bin/bench_backward "$CASE" > "$R/$label.log" 2>&1
  echo "$label $(grep -h 'TB/s' "$R/$label.log" | sed 's/  */ /g') $(grep -h 'check:' "$R/$label.log" | cut -c1-20)"
}
for round in 1 2; do
  for CASE in "rmsnorm_backward [32768x4096 bfloat16]" "layernorm_backward [32768x4096 bfloat16]" "rmsnorm_backward [32768x4096 float32]"; do
    tag=$(echo "$CASE" | tr -c 'a-z0-9' '_')
    run "r${round}_${tag}_default" X=1
    run "r${round}_${tag}_512_2_noprefetch" KILN_COLPART=512,2,0
    run "r${round}_${tag}_512_1_prefetch" KILN_COLPART=512,1,1
    run "r${round}_${tag}_256_2_prefetch" KILN_COLPART=256,2,1
    run "r${round}_${tag}_256_3_prefetch" KILN_COLPART=256,3,1
    run "r${round}_${tag}_parts1024" KILN_COLPART_PARTS=1024
    run "r${round}_${tag}_parts256" KILN_COLPART_PARTS=256
  done
  CASE="softmax_backward [32768x4096 bfloat16]"
  run "r${round}_softmax_default" X=1
  run "r${round}_softmax_held" KILN_ROW_CONFIG='{"persistent": 1}'
  run "r${round}_softmax_held_mb2" KILN_ROW_CONFIG='{"persistent": 1, "min_blocks": 2}'
  run "r${round}_softmax_held256" KILN_ROW_CONFIG='{"persistent": 1, "threads_per_row": 256}'
  run "r${round}_softmax_loop256" KILN_ROW_CONFIG='{"persistent": 0, "threads_per_row": 256, "evict": 1}'
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
