#!/usr/bin/env bash
# Session 36 call 10 (bundle of the commit it prints): lesson 5 (softmax and
# the mean cross-entropy compiled ahead of time, in a program that links
# kiln_runtime only) and kiln_aot_tests [gpu] once more (the one-kernel
# launcher's packer now named after the function).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; echo "bundle $(cat $K/COMMIT)"
ldd $K/bin/lesson_05_aot > "$R/ldd.txt" 2>&1; echo "kiln_compiler in ldd: $(grep -c kiln_compiler "$R/ldd.txt")"
timeout 120 $K/bin/lesson_05_aot > "$R/lesson5.log" 2>&1; echo "lesson 5 rc=$? $SECONDS s"; cat "$R/lesson5.log"
LD_LIBRARY_PATH=$K/lib timeout 150 $K/bin/kiln_aot_tests "[gpu]" --durations yes > "$R/aot.log" 2>&1; echo "aot [gpu] rc=$? $SECONDS s"; tail -3 "$R/aot.log" | head -1
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
