#!/usr/bin/env bash
# Session 35 call 1: cross_entropy's rows with the gather's column loaded
# before the row's loop and its value after it (bb98d48, "new") against
# the same kernels loading both before the loop (689c0af, "old"), rounds
# interleaved, L2 flushed as the anchors do, then once not flushed; then
# the new bundle's cross_entropy tests on the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
for b in old new; do
  W=/tmp/kb-$b; rm -rf $W && mkdir -p $W
  f=.device/kiln-bundle.tar.xz; [ $b = old ] && f=.device/old-bundle.tar.xz
  xz -dc $f | tar -C $W -xf -; echo "$b bundle $(cat $W/kiln/COMMIT | tr '\n' ' ')"
done
C=("cross_entropy [8192x32768 bfloat16]" "cross_entropy (dynamic N) [8192x32768 bfloat16]" "cross_entropy [8192x128256 bfloat16]")
B() { local b=$1; shift; K=/tmp/kb-$b/kiln; env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache-$b "$@"; }
for round in 1 2 3 noflush; do
  for b in old new; do
    [ $SECONDS -gt 200 ] && break
    mode=KILN_X=1; [ $round = noflush ] && mode=KILN_BENCH_NOFLUSH=1
    B $b $mode timeout 60 /tmp/kb-$b/kiln/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$b.log" 2>&1
    echo "== round $round $b rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$round-$b.log" | grep -v "copy roof" | cut -c1-110
  done
done
B new timeout 200 /tmp/kb-new/kiln/bin/kiln_tests "*cross_entropy*,a row kernel's grid tail*" > "$R/tests.log" 2>&1
echo "== tests rc=$? $SECONDS s"; tail -4 "$R/tests.log"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
