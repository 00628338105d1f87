#!/usr/bin/env bash
# Session 17 call 5: what holds the bf16 column sum (sum(0) 32768x4096):
# ncu of kiln's first (column-form) kernel in bf16 and f32, and of
# torch.compile's kernel for x.sum(0) in bf16.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section Occupancy --section LaunchStats"
for t in bfloat16 float32; do
  echo "== ncu kiln sum(0) $t $SECONDS s"
  timeout 120 ncu --clock-control none -k regex:kiln_row0 --launch-skip 3 --launch-count 1 $S \
    "$K/bin/bench_reduction" "sum(0) [32768x4096 $t" > "$R/ncu-kiln-sum0-$t.log" 2>&1; echo "rc=$?"
done
cat > /tmp/tc.py <<'PY'
import torch
x = torch.randn(32768, 4096, dtype=torch.bfloat16, device="cuda")
f = torch.compile(lambda x: x.sum(0))
for _ in range(6): f(x)
torch.cuda.synchronize()
PY
echo "== inductor's kernel $SECONDS s"
TORCH_LOGS=output_code timeout 90 python3 /tmp/tc.py > "$R/inductor-sum0-bf16.log" 2>&1; echo "rc=$?"
echo "== ncu torch.compile sum(0) bf16 $SECONDS s"
timeout 200 ncu --clock-control none -k regex:triton --launch-skip 3 --launch-count 2 $S python3 /tmp/tc.py > "$R/ncu-tc-sum0-bf16.log" 2>&1; echo "rc=$?"
cd "$OUT" && tar czf r.tgz r && rm -rf r
