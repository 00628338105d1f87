#!/usr/bin/env bash
# GPU machine: runs selected [gpu] tests under compute-sanitizer memcheck
# (out-of-bounds and misaligned accesses, leaks of device memory). Usage:
#   bash scripts/gpu-memcheck.sh OUTDIR "test name" ["test name"...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-/tmp/kiln-out}}; shift
mkdir -p "$OUTDIR"
rm -rf /tmp/kiln-bundle && mkdir -p /tmp/kiln-bundle
xz -dc .device/kiln-bundle.tar.xz | tar -C /tmp/kiln-bundle -xf -
K=/tmp/kiln-bundle/kiln
export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
status=0
for t in "$@"; do
  echo "== memcheck: $t" | tee -a "$OUTDIR/memcheck.log"
  compute-sanitizer --tool memcheck --leak-check full --print-limit 20 "$K/bin/kiln_tests" "$t" 2>&1 \
    | tail -n 8 | tee -a "$OUTDIR/memcheck.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit $status
