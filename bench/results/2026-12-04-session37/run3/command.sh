#!/usr/bin/env bash
# Session 37 calls 3 and 4 (bundle of the commit it prints): kiln next to
# the CUDA runtime -- kiln_interop_tests (each test case in its own process),
# lesson 6 (CUDA graph capture), and the runtime's, facade's and AOT's [gpu]
# tests (the workspace and module-load paths changed).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
B $K/bin/kiln_interop_tests --list-test-names-only | sed -e 's/^ *//' -e '/^$/d' > $R/interop-names.txt
i=0; while IFS= read -r name; do i=$((i+1))
  B timeout 120 $K/bin/kiln_interop_tests "$name" > $R/interop-$i.log 2>&1; echo "interop $i rc=$? $name"
  tail -3 $R/interop-$i.log | grep -v "^$" | head -2
done < $R/interop-names.txt
for t in kiln_runtime_tests kiln_facade_tests kiln_facade_workspace_tests kiln_aot_tests; do
  B timeout 200 $K/bin/$t "[gpu]" > $R/$t.log 2>&1; echo "$t rc=$? $(tail -2 $R/$t.log | head -1)"
done
echo "=== lesson 6 ($SECONDS s)"
B timeout 120 $K/bin/lesson_06_cuda_graphs > $R/lesson6.log 2>&1; echo "rc=$?"; tail -6 $R/lesson6.log
B timeout 120 $K/bin/lesson_06_cuda_graphs 512 > $R/lesson6-512.log 2>&1; echo "rc=$?"; tail -3 $R/lesson6-512.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
