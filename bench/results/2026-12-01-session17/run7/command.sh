#!/usr/bin/env bash
# Session 17 call 7 (after the review's memoized walks in the row emitter):
# the reduction GPU tests that cover every composite, op, form and split.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r; mkdir -p "$R"
W=/tmp/kiln-bundle; rm -rf $W && mkdir -p $W && xz -dc .device/kiln-bundle.tar.xz | tar -C $W -xf -
K=$W/kiln; export LD_LIBRARY_PATH=$K/lib:${LD_LIBRARY_PATH:-}
i=0
for t in "every reduction op along the last axis*" "the op library's row-wise composites*" "cross_entropy matches the reference*" \
         "softmax of rows holding -inf*" "split reductions of elementwise*" "few long rows split across clusters*" \
         "argmax and argmin split into parts*" "whole-tensor reductions and few long rows*" "column reductions (split*" \
         "several outputs of one row reduction*" "elementwise producers and consumers fused*" "graphs split into several kernels*"; do
  i=$((i+1))
  ( timeout 170 "$K/bin/kiln_tests" "$t" --reporter compact > "$R/t$i.log" 2>&1; echo "rc=$? $t" >> "$R/t$i.log" ) &
done
wait
for f in "$R"/t*.log; do tail -n 2 "$f"; done | tee "$R/summary.log"
cd "$OUT" && tar czf r.tgz r && rm -rf r
