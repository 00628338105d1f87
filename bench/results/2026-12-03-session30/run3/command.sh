#!/usr/bin/env bash
# Session 30 call 3: the [gpu] tests of layernorm f32 1024x262144's rebuild
# that call 2 did not reach (its composites at every row length passed
# there; "held rows with the next row prefetched" took its 250 s), then
# every pointwise and reduction benchmark next to the anchors at this
# session's kernels (column reductions in one kernel, the rebuild).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
echo "=== tests ($SECONDS s)"
LD_LIBRARY_PATH=$K/lib timeout 100 stdbuf -oL $K/bin/kiln_tests -d yes "kernels rebuilt after a spill stay correct from unaligned base pointers,a constant row has variance zero and normalizes to the bias,several outputs of one row reduction: statistics*" > "$R/tests-layernorm.log" 2>&1; echo "rc=$?"
grep -E "passed|failed|FAILED" "$R/tests-layernorm.log" | tail -5
echo "=== benchmarks ($SECONDS s)"
KILN_STAGES="bench anchors" KILN_BENCHES="reduction pointwise" KILN_ANCHORS="pointwise reduction" \
  KILN_TIMEOUT_BENCH=150 KILN_TIMEOUT_ANCHORS=300 KILN_DEADLINE_S=440 bash scripts/gpu-run.sh "$R/b"
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
