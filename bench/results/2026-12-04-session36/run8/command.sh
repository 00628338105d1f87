#!/usr/bin/env bash
# Session 36 call 8 (bundle of the commit it prints): call 7's one failure,
# the tuning test's "never slower than the heuristic" timing check (gelu bf16
# tuned 68.61 us against the heuristic's 66.99 + 2%), ran beside seven other
# GPU test processes there; here alone, three times.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
for i in 1 2 3; do
  rm -rf /tmp/tcache; mkdir -p /tmp/tcache
  ( cd /tmp && LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/tcache timeout 100 $K/bin/kiln_tests "tuning: softmax and gelu(x + b) at two shapes each*" > "$R/tuning-$i.log" 2>&1 ); echo "run $i rc=$? $SECONDS s"
  grep -h "^tuning\|passed\|failed" "$R/tuning-$i.log" | cut -c1-60,200-330
  [ $SECONDS -gt 200 ] && break
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
