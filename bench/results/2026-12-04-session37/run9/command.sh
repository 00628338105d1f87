#!/usr/bin/env bash
# Session 37 call 9 (bundle of the commit it prints): ahead-of-time variants
# (kiln aot --variant) -- kiln_aot_tests [gpu], one process per test case,
# with the variant case's timings (with variants / the hinted build only);
# then the interop tests and lesson 5 (they launch AOT graphs too).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
B() { env LD_LIBRARY_PATH=$K/lib KILN_CACHE_DIR=/tmp/cache "$@"; }
for t in kiln_aot_tests kiln_interop_tests; do
  B $K/bin/$t "[gpu]" --list-test-names-only | sed -e 's/^ *//' -e '/^$/d' > $R/$t-names.txt
  i=0; while IFS= read -r name; do i=$((i+1))
    B timeout 200 $K/bin/$t "$name" > $R/$t-$i.log 2>&1; echo "$t $i rc=$? $name"
    grep -h "softmax_rows f32" $R/$t-$i.log; tail -2 $R/$t-$i.log | head -1
  done < $R/$t-names.txt
done
B timeout 100 $K/bin/lesson_05_aot > $R/lesson5.log 2>&1; echo "lesson 5 rc=$?"; tail -3 $R/lesson5.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
