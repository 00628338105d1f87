#!/usr/bin/env bash
# Builds bench/probes/idle_sms.cu on the development machine (no GPU needed):
# the AOT sources of kiln's kernels into $GEN, then the probe into $1.
#   bash bench/probes/idle_sms/build.sh /path/to/idle_sms   (KILN_BUILD_DIR: kiln's build, default build)
set -euo pipefail
cd "$(dirname "$0")/../../.."
B=${KILN_BUILD_DIR:-build}; GEN=${GEN:-/tmp/idle_sms_gen}; G=bench/probes/idle_sms
OUTBIN=${1:-/tmp/idle_sms}
mkdir -p "$GEN/split"
C='{"threads_per_row": 1024, "threads": 1024, "vector": 4, "persistent": 0, "unroll": 4, "row_loop": 1, "max_blocks": 20, "evict": 1}'
D='{"threads_per_row": 512, "threads": 512, "vector": 4, "persistent": 0, "unroll": 4, "row_loop": 1, "max_blocks": 40, "evict": 1, "min_blocks": 2}'
: > "$GEN/split_all.h"
for op in ln rms smx; do
  "$B/tools/kiln" aot $G/$op.kiln -o "$GEN/" > /dev/null
  for rc in 40 80 120; do
    rm=$((1024 - rc))
    sed "s/1024,/$rm,/g" $G/$op.kiln > "$GEN/split/${op}_m$rc.kiln"
    sed "s/1024,/$rc,/g" $G/$op.kiln > "$GEN/split/${op}_c$rc.kiln"
    "$B/tools/kiln" aot "$GEN/split/${op}_m$rc.kiln" -o "$GEN/" > /dev/null
    "$B/tools/kiln" aot "$GEN/split/${op}_c$rc.kiln" -o "$GEN/" --row-config "$C" > /dev/null
    "$B/tools/kiln" aot "$GEN/split/${op}_c$rc.kiln" --name ${op}_d$rc -o "$GEN/" --row-config "$D" > /dev/null
    printf '#include "%s_m%s.h"\n#include "%s_c%s.h"\n#include "%s_d%s.h"\n' $op $rc $op $rc $op $rc >> "$GEN/split_all.h"
  done
done
nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I"$GEN" -Iruntime/include -Icore/include -o "$OUTBIN" \
  bench/probes/idle_sms.cu "$GEN"/*.cpp "$B/runtime/libkiln_runtime.a" "$B/core/libkiln_core.a" -ldl \
  -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc
echo "idle_sms: $OUTBIN"
