#!/usr/bin/env bash
# Session 46 call 2: why the attention block's row-softmax form took 62 us
# on the H100 (stored product 41). Config sweep of the form's kernel
# (KILN_BLOCK_MATMUL_CONFIG), the heuristic's and the stored block beside
# them, then ncu --set full on the form's kernel.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
base='"block_k": 64, "block_m": 128, "cluster_m": 1, "consumer_regs": 232, "group_m": 16, "pingpong": 0, "tma_store": 1'
i=0
for c in "heuristic" "256 4 3 4" "256 4 3 1" "128 4 3 2" "128 4 4 2" "256 2 3 4" "256 8 3 4" "128 8 3 2" "256 1 3 4"; do
  i=$((i+1)); F=$R/sweep-$i.log
  if [ "$c" = heuristic ]; then unset KILN_BLOCK_MATMUL_CONFIG; else
    set -- $c; export KILN_BLOCK_MATMUL_CONFIG="{$base, \"block_n\": $1, \"cluster_n\": $2, \"stages\": $3, \"staging_buffers\": $4}"; fi
  KILN_BLOCK_ROW_SOFTMAX=1 KILN_CACHE_DIR=$(mktemp -d) timeout 40 $K/bin/bench_matmul block > $F 2>&1
  echo "[$c] rc=$? $(grep 'block attention' $F | sed 's/  */ /g' | cut -c1-90 | tr '\n' '|')"
done
unset KILN_BLOCK_MATMUL_CONFIG
KILN_BLOCK_ROW_SOFTMAX=0 KILN_CACHE_DIR=$(mktemp -d) timeout 40 $K/bin/bench_matmul block > $R/stored.log 2>&1
echo "[stored] $(grep 'block attention' $R/stored.log | sed 's/  */ /g' | cut -c1-90 | tr '\n' '|')"
echo "== sweep done $SECONDS s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
KILN_BLOCK_ROW_SOFTMAX=1 KILN_CACHE_DIR=$(mktemp -d) timeout 150 $NCU --set full --clock-control none -k regex:kiln_matmul --launch-skip 5 --launch-count 1 -o $R/ncu-row $K/bin/bench_matmul block > $R/ncu-row.log 2>&1; echo "ncu rc=$?"
$NCU --import $R/ncu-row.ncu-rep --page details > $R/ncu-row.txt 2>&1
$NCU --import $R/ncu-row.ncu-rep --page source --csv --print-source sass > $R/ncu-row-source.csv 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers|Executed Ipc|Issue Slots|No Eligible|Warp Cycles Per Issued|L2 Hit|Grid Size|Cluster|Block Size" $R/ncu-row.txt | head -30
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
