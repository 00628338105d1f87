#!/usr/bin/env bash
# Session 25 call 3 (bundle 9ec721e + a local hack, KILN_HACK_NOELSE: the
# one-step kernels without their fallback loop, correct only for rows the
# one-step branch covers, as the benchmark's hinted builds are): is the
# fallback loop's register count what made call 2's one-step kernels slow?
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
cd $R
for round in 1 2; do
KILN_HACK_NOELSE=1 timeout 100 $K/bin/bench_reduction "(dynamic N) [32768x" "(dynamic N) [16384x" "(dynamic N) [8192x" > $R/bench-noelse$round.log 2>&1; echo "noelse rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-noelse$round.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-100
timeout 100 $K/bin/bench_reduction "(dynamic N) [32768x" "(dynamic N) [16384x" "(dynamic N) [8192x" > $R/bench-else$round.log 2>&1; echo "with else rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-else$round.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-100
done
timeout 60 $K/bin/bench_reduction "softmax(-1) [32768x4096" "rmsnorm [32768x4096" "layernorm [32768x4096" > $R/bench-static.log 2>&1; echo "static rc=$? $SECONDS s"
grep -h "kiln [0-9] kernel\|FAIL" $R/bench-static.log | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-100
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
