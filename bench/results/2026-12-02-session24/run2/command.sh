#!/usr/bin/env bash
# Session 24 call 2 (bundle HEAD): dynamic row lengths with the long-row
# variant (every dynamic case), configs either side of the short-row bound
# (8192, 16384), and the dynamic-length GPU tests.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/smi.txt 2>&1
timeout 90 $K/bin/bench_reduction "(dynamic N)" > $R/bench-dyn.log 2>&1; echo "bench rc=$? $SECONDS s"
for c in '{"threads_per_row": 128, "threads": 128, "evict": 1}' '{"threads_per_row": 256, "threads": 256, "evict": 1}' '{"threads_per_row": 512, "threads": 512, "evict": 1}'; do
  echo "### KILN_ROW_CONFIG=$c" >> $R/bench-sweep.log
  KILN_ROW_CONFIG="$c" timeout 40 $K/bin/bench_reduction "(dynamic N) [16384x8192" "(dynamic N) [8192x16384" >> $R/bench-sweep.log 2>&1
done; echo "sweep $SECONDS s"
T="long dynamic rows launch a variant built once for them,rows of a dynamic length match the reference*"
timeout 240 $K/bin/kiln_tests "$T" > $R/tests.log 2>&1; echo "tests rc=$? $SECONDS s"
tail -3 $R/tests.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
