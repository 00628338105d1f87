#!/usr/bin/env bash
# Session 35 call 4: the L2's fetch size on the row kernels' 16-byte loads
# (KILN_EXP_L2_FETCH=64B|128B|256B: ld.global.nc...L2::<size>, an
# experiment's knob) against none, rounds interleaved, L2 flushed: the
# cases under 4.0 TB/s and a few that pass.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT | tr '\n' ' ')"
C=("sum(-1) [32768x4096 bfloat16]" "sum(-1) [4096x32768 bfloat16]" "sum(-1) [32768x4096 float32]" "cross_entropy [8192x32768 bfloat16]"
   "softmax(-1) [1024x262144 float32]" "layernorm [1024x262144 float32]" "softmax(-1) [4096x32768 bfloat16]" "rmsnorm [32768x4096 bfloat16]")
for round in 1 2; do
  for f in none 256B 128B 64B; do
    [ $SECONDS -gt 300 ] && break
    mode=KILN_X=1; [ $f != none ] && mode=KILN_EXP_L2_FETCH=$f
    env LD_LIBRARY_PATH=$K/lib $mode KILN_CACHE_DIR=/tmp/cache-$f timeout 90 $K/bin/bench_reduction "${C[@]}" > "$R/bench-$round-$f.log" 2>&1
    echo "== round $round $f rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$round-$f.log" | grep -v "copy roof" | cut -c1-100
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
