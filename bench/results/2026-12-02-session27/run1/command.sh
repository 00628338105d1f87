#!/usr/bin/env bash
# Session 27 call 1 (bundle 751372a): the wave tail of held rows. Time the
# held 4096x32768 rows (softmax, layernorm; bf16 at 2 blocks/SM = 264 slots,
# f32 at 1 block/SM = 132) at 3960, 4092, 4096, 4224 rows, and the 1024x262144
# cluster rows at 960, 1020, 1024, 1050 rows: is the last partial wave paid
# as a whole wave? Two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cd $R
B="timeout 60 $K/bin/bench_reduction"
for round in 1 2; do
  echo "== round $round"
  for n in 3960 4092 4096 4224; do
    KILN_BENCH_ROWS=4096:$n $B "softmax(-1) [${n}x32768" "layernorm [${n}x32768" > a$round-$n.log 2>&1
    grep -h "kiln [0-9] kernel\|FAIL\|rror" a$round-$n.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-90
  done
  for n in 960 1020 1024 1050; do
    KILN_BENCH_ROWS=1024:$n $B "softmax(-1) [${n}x262144" "layernorm [${n}x262144" > b$round-$n.log 2>&1
    grep -h "kiln [0-9] kernel\|FAIL\|rror" b$round-$n.log | grep -v dynamic | sed 's/ kiln 1 kernel(s)//; s/(p95 .*) //' | cut -c1-90
  done
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
