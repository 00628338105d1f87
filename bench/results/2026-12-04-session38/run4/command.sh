#!/usr/bin/env bash
# Session 38 call 4 (the bundle of the commit it prints): call 3 again after
# its bug was fixed (the fused kernels' grid was capped at the blocks that fit
# at once, leaving parts undone: every norm check failed), each run with a
# fresh disk cache (in call 3 the knobs' runs reused the first run's
# kernel); first the gradients' [gpu] tests. With the
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
  env KILN_CACHE_DIR="$(mktemp -d)" "$@" timeout 60 $K/bin/bench_backward "$CASE" > "$R/$label.log" 2>&1
  echo "$label $(grep -h 'TB/s' "$R/$label.log" | sed 's/  */ /g') $(grep -h 'check:' "$R/$label.log" | cut -c1-20)"
}
$K/bin/kiln_tests "[grad]" --list-test-names-only | sed -e 's/^ *//' -e '/^$/d' > $R/grad-names.txt
i=0
while IFS= read -r name; do
  i=$((i + 1))
  ( timeout 240 $K/bin/kiln_tests "$name" --reporter compact > $R/grad-$i.log 2>&1; echo "$? $name" > $R/grad-$i.rc ) &
done < $R/grad-names.txt
wait
cat $R/grad-*.rc | grep -v "^0 " ; echo "grad tests: $(grep -l '^0 ' $R/grad-*.rc | wc -l) of $(ls $R/grad-*.rc | wc -l) passed"
for f in $R/grad-*.rc; do read -r rc n < $f; [ "$rc" = 0 ] || tail -30 "${f%.rc}.log"; done
echo "== tests done $SECONDS s"
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
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
