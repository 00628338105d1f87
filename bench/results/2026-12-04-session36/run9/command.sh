#!/usr/bin/env bash
# Session 36 call 9 (bundle of the commit it prints): kiln aot for any graph
# (rt::AotGraph: several kernels with a workspace, a grid tail's workspace, a
# matmul's TMA descriptors): kiln_aot_tests [gpu]; then the facade's GPU
# tests that go through the code moved into the runtime (the workspace, the
# tensor-map launch): facade, workspace and the matmul tests.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
export LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/kcache
ldd $K/bin/kiln_aot_tests > "$R/aot-ldd.txt" 2>&1; echo "kiln_compiler in ldd: $(grep -c kiln_compiler "$R/aot-ldd.txt")"
timeout 150 $K/bin/kiln_aot_tests "[gpu]" --durations yes > "$R/aot.log" 2>&1; echo "aot [gpu] rc=$? $SECONDS s"; grep -E "^[0-9.]+ s:|passed|failed|FAILED" "$R/aot.log" | head -12
i=0
for t in "matmul matches the reference: dtypes*" "matmul epilogues match the reference" \
         "matmul: a misaligned operand of the Hopper kernel is a clear error" "matmul: clusters of 2 (B multicast)*"; do
  i=$((i+1)); ( timeout 200 $K/bin/kiln_tests "$t" --durations yes > "$R/mm-$i.log" 2>&1; echo "rc=$?" >> "$R/mm-$i.log" ) &
done
timeout 150 $K/bin/kiln_facade_tests "[gpu]" > "$R/facade.log" 2>&1; echo "facade [gpu] rc=$? $SECONDS s"; tail -2 "$R/facade.log" | head -1
timeout 100 $K/bin/kiln_facade_workspace_tests "[gpu]" > "$R/ws.log" 2>&1; echo "workspace [gpu] rc=$? $SECONDS s"; tail -2 "$R/ws.log" | head -1
wait
for f in "$R"/mm-*.log; do echo "$f: $(grep -E 'passed|failed' "$f" | tail -1) $(tail -1 "$f")"; done
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
