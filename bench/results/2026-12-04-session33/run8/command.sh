#!/usr/bin/env bash
# Session 33 call 8: what the L2 flush's dirty lines cost the read-only
# kernels (sums, cross_entropy) that stay under 4.0 TB/s: each case flushed
# as the anchors do (a memset of twice the L2), flushed and then a read of
# another buffer of twice the L2 (KILN_BENCH_FLUSH=read: the dirty lines
# written back before the timed run), and not flushed; softmax bf16 (which
# writes as much as it reads) as the control.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
C=("sum(-1) [32768x4096 bfloat16]" "sum(-1) [4096x32768 bfloat16]" "sum(-1) [32768x4096 float32]" "cross_entropy [8192x32768 bfloat16]" "softmax(-1) [32768x4096 bfloat16]")
i=0
for mode in "KILN_X=1" "KILN_BENCH_FLUSH=read" "KILN_BENCH_NOFLUSH=1" "KILN_BENCH_FLUSH=read"; do
  i=$((i+1)); [ $SECONDS -gt 100 ] && break
  env LD_LIBRARY_PATH=$K/lib $mode KILN_CACHE_DIR=/tmp/cache timeout 40 $K/bin/bench_reduction "${C[@]}" > "$R/bench-$i.log" 2>&1
  echo "== [$i] $mode rc=$? $SECONDS s"; grep -h "TB/s" "$R/bench-$i.log" | grep -v "copy roof" | cut -c1-110
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
