#!/usr/bin/env bash
# Session 36 call 5 (bundle of the commit it prints): does the launch host
# cost depend on where the launching thread runs? The host's CPUs and the
# GPU's affinity, then `bench_pointwise launch` (kiln Kernel::launch beside
# raw cuLaunchKernel, bursts of 64 after the GPU drained) and floor.cu
# unpinned and pinned (taskset) to single cores, each pinning applying to
# kiln and raw alike.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
{ lscpu; nvidia-smi topo -m; nvidia-smi -q | grep -i -A3 "numa\|affinity"; cat /proc/cmdline; } > "$R/host.txt" 2>&1
grep -E "Model name|^CPU\(s\)|NUMA|MHz|Hypervisor|Thread|Socket" "$R/host.txt" | head -12
nvidia-smi topo -m 2>&1 | head -4
(cd $K/anchors && nvcc -arch=sm_90 -O2 floor.cu -o /tmp/floor -lcuda -lnvrtc) > "$R/nvcc.log" 2>&1
N=$(nproc)
for pin in none 0 $((N/2)) $((N-1)); do
  P=""; [ $pin != none ] && P="taskset -c $pin"
  LD_LIBRARY_PATH=$K/lib timeout 60 $P $K/bin/bench_pointwise launch > "$R/launch-$pin.log" 2>&1
  echo "== pin $pin rc=$? $SECONDS s"; grep -h "launch host cost:" "$R/launch-$pin.log" | grep -E "kiln Kernel::launch, stream 0|raw cuLaunchKernel, stream 0 " | cut -c1-120
  timeout 60 $P /tmp/floor > "$R/floor-$pin.log" 2>&1; grep -h "host_us" "$R/floor-$pin.log"
done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
