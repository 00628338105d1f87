#!/usr/bin/env bash
# Session 24 call 7 (bundle HEAD): the facade's [gpu] tests (first time in
# a bundle), the tuning GPU test (CompileOptions::dims now hints the first
# build), the variant test.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
export K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
cat $K/COMMIT
timeout 60 $K/bin/kiln_facade_tests "[gpu]" > $R/facade.log 2>&1; echo "facade rc=$? $SECONDS s"; tail -2 $R/facade.log
timeout 60 $K/bin/kiln_facade_workspace_tests "[gpu]" > $R/workspace.log 2>&1; echo "workspace rc=$? $SECONDS s"; tail -2 $R/workspace.log
timeout 150 $K/bin/kiln_tests "[gpu][tuning]" > $R/tuning.log 2>&1; echo "tuning rc=$? $SECONDS s"; tail -2 $R/tuning.log
timeout 60 $K/bin/kiln_tests "long dynamic rows launch a variant built once for them" > $R/variant.log 2>&1; echo "variant rc=$? $SECONDS s"; tail -2 $R/variant.log
echo "== done $SECONDS s"
cd "$OUT" && tar czf r.tgz r && rm -rf r
