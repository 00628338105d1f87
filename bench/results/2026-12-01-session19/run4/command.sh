#!/usr/bin/env bash
# Session 19 call 4: the new heuristic (held f32 rows of 262144 in clusters
# of 16 at two blocks per SM) on every pointwise and reduction benchmark
# next to the anchors; kiln-tune's whole-graph times for the 262144 rows
# the benchmarks do not cover (log_softmax and layernorm without affine
# f32, residual add + rmsnorm bf16), heuristic against every candidate.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
for gname in lsm lnn rrms; do
  KILN_CACHE=0 timeout 60 "$K/bin/kiln-tune" tune .device/$gname.graph --verbose --iters 20 -o $R/tune-$gname.json > $R/tune-$gname.log 2>&1; echo "$gname rc=$?"
  grep -E "tuned now" $R/tune-$gname.log | head -2
done
echo "== benches $SECONDS s"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" KILN_TIMEOUT_BENCH=150 \
  KILN_TIMEOUT_ANCHORS=240 KILN_DEADLINE_S=450 bash scripts/gpu-run.sh "$R/b" > $R/gpu-run.log 2>&1; echo "gpu-run rc=$?"
grep -h "1024x262144" $R/b/*.log | grep -i "kiln .*kernel" | head
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
