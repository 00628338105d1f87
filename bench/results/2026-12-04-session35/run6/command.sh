#!/usr/bin/env bash
# Session 35 call 6: grid tails at unroll 32 (c2ab223, "new": the last
# block reads cross_entropy's 8192 per-row losses in two rounds of L2 loads)
# against unroll 8 (4caa7a0 = bb98d48's kernels, "old"), rounds interleaved,
# L2 flushed; then the new bundle's GPU tests of kernels with grid tails.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
for b in old new; do
  W=/tmp/kb-$b; rm -rf $W && mkdir -p $W
  f=.device/kiln-bundle.tar.xz; [ $b = old ] && f=.device/old-bundle.tar.xz
  xz -dc $f | tar -C $W -xf -; echo "$b bundle $(cat $W/kiln/COMMIT | tr '\n' ' ')"
done
C=("cross_entropy [8192x32768 bfloat16]" "cross_entropy (dynamic N) [8192x32768 bfloat16]" "cross_entropy [8192x128256 bfloat16]"
   "sum [32768x4096 float32]" "sum [32768x4096 bfloat16]" "sum(x*x) [32768x4096 float32]")
B() { local b=$1; shift; K=/tmp/kb-$b/kiln; env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache-$b "$@"; }
for round in 1 2 3; do
  for b in old new; do
    [ $SECONDS -gt 150 ] && break
    B $b timeout 60 /tmp/kb-$b/kiln/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$b.log" 2>&1
    echo "== round $round $b rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$round-$b.log" | grep -v "copy roof" | cut -c1-100
  done
done
B new timeout 200 /tmp/kb-new/kiln/bin/kiln_tests "*cross_entropy*,a row kernel's grid tail*,whole-tensor reductions*,argmax and argmin split*,var and std split*,split reductions of elementwise*" > "$R/tests.log" 2>&1
echo "== tests rc=$? $SECONDS s"; tail -4 "$R/tests.log"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
