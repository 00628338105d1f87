#!/usr/bin/env bash
# Session 24 call 9 (bundle HEAD): cross_entropy of a dynamic length with the
# one-pass rule; dynamic layernorm by the heuristic (variance in two passes)
# and with welford 1 (one pass) at each range's thread count.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 60 $K/bin/bench_reduction "layernorm (dynamic N)" "cross_entropy (dynamic N)" > $R/bench.log 2>&1; echo "bench rc=$? $SECONDS s"
for tc in "128|[32768x4096" "256|[8192x16384" "512|[4096x32768"; do
  t=${tc%%|*}; cs=${tc#*|}
  c="{\"threads_per_row\": $t, \"threads\": $t, \"evict\": 1, \"welford\": 1}"
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 30 $K/bin/bench_reduction "layernorm (dynamic N) $cs" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL\|^###" $R/bench.log $R/bench-sweep.log | cut -c1-112
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
