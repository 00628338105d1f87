#!/usr/bin/env bash
# Session 33 call 5: what the pointwise anchors launch where kiln is 0.1-0.4%
# behind (x*y+z f32, x+y bf16 at 32768x4096): torch.compile's Triton kernel
# (source, chosen config, PTX) and eager's grid and block.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
export TORCHINDUCTOR_CACHE_DIR=$R/inductor TRITON_CACHE_DIR=$R/triton
timeout 300 python3 bench/probe_anchor_kernels.py "$R/probe" 2>&1 | tee "$R/probe.log" | grep -v Warning | head -60
find "$R/inductor" -name "*.best_config" -exec sh -c 'echo "$1"; cat "$1"; echo' _ {} \; 2>/dev/null | head -20
rm -f $R/probe/trace-*.json
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
